"""Worker processes of a chaos run: spawn, SIGKILL, SIGTERM (timed), replace, watch for crashes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "_chaos_worker.py"


@dataclass
class Proc:
    mode: str
    popen: subprocess.Popen[bytes]
    log: Path
    signalled: str | None = None  # "kill" / "term" once the test signalled it

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class TermExit:
    pid: int
    mode: str
    seconds: float  # from SIGTERM to exit; inf if it never exited
    returncode: int | None


@dataclass
class Kill:
    pid: int
    mode: str
    open_runs: int  # runs started in that process with no end record at the kill


@dataclass
class Fleet:
    """A fixed number of sync and async worker processes on one queue, kept at strength."""

    url: str
    queue: str
    runs_dir: Path
    logs_dir: Path
    settings: dict[str, Any]
    exit_grace: float
    procs: list[Proc] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    term_exits: list[TermExit] = field(default_factory=list)
    _watchers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def shutdown_timeout(self) -> float:
        return float(self.settings["worker"]["shutdown_timeout"])

    def spawn(self, mode: str) -> Proc:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "queue"), str(ROOT), env.get("PYTHONPATH", "")])
        log = self.logs_dir / f"{mode}-{len(self.procs)}.log"
        argv = [sys.executable, str(SCRIPT), mode, self.url, self.queue, str(self.runs_dir),
                json.dumps(self.settings)]
        with log.open("wb") as out:
            popen = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(mode, popen, log)
        self.procs.append(proc)
        return proc

    def living(self) -> list[Proc]:
        return [p for p in self.procs if p.signalled is None and p.alive()]

    def crashed(self) -> list[Proc]:
        """Processes that exited although the test never signalled them."""
        return [p for p in self.procs if p.signalled is None and not p.alive()]

    def kill_one(self, rng: random.Random) -> Kill:
        proc = rng.choice(self.living())
        proc.signalled = "kill"
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(30)
        kill = Kill(proc.pid, proc.mode, open_runs(self.runs_dir / f"{proc.pid}.runs"))
        self.kills.append(kill)
        self.spawn(proc.mode)
        return kill

    def term_one(self, rng: random.Random, replace: bool = True) -> Proc:
        """SIGTERM the worker with the most runs in progress (ties at random): a graceful shutdown
        with handlers still running is the case that must lose no lease."""
        living = self.living()
        rng.shuffle(living)
        proc = max(living, key=lambda p: open_runs(self.runs_dir / f"{p.pid}.runs"))
        self._term(proc)
        if replace:
            self.spawn(proc.mode)
        return proc

    def _term(self, proc: Proc) -> None:
        proc.signalled = "term"
        sent = time.monotonic()
        proc.popen.send_signal(signal.SIGTERM)
        limit = self.shutdown_timeout + self.exit_grace + 30

        def watch() -> None:
            try:
                proc.popen.wait(limit)
                seconds = time.monotonic() - sent
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(10)
                seconds = float("inf")
            with self._lock:
                self.term_exits.append(TermExit(proc.pid, proc.mode, seconds, proc.popen.returncode))

        watcher = threading.Thread(target=watch, daemon=True, name=f"term-{proc.pid}")
        watcher.start()
        self._watchers.append(watcher)

    def stop_all(self) -> None:
        """SIGTERM every living worker (timed like any other) and wait for all watchers."""
        for proc in self.living():
            self._term(proc)
        for watcher in self._watchers:
            watcher.join()

    def force_kill_all(self) -> None:
        """Teardown backstop: nothing of ours survives the test."""
        for proc in self.procs:
            if proc.alive():
                proc.popen.kill()
                proc.popen.wait(10)


def open_runs(path: Path) -> int:
    """Runs a (now dead) process started but never finished, read from its run record."""
    open_ids: dict[str, int] = {}
    for event, job_id, *_ in read_runs(path):
        open_ids[job_id] = open_ids.get(job_id, 0) + (1 if event == "start" else -1)
    return sum(1 for n in open_ids.values() if n > 0)


def read_runs(path: Path) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.split() for line in text.splitlines() if line.strip()]
