"""Worker processes of a chaos run: spawn, SIGKILL, SIGTERM (timed), partition, freeze, replace, watch.

Each worker process connects through its own port of the test's proxy, so the test can cut every
connection at once or cut off one worker alone.
"""

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

from _proxy import TcpProxy

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "_chaos_worker.py"


@dataclass
class Proc:
    mode: str
    popen: subprocess.Popen[bytes]
    log: Path
    port: int  # its proxy port
    runs: Path  # its run record
    signalled: str | None = None  # "kill" / "term" / "partition" once the test signalled it
    frozen: bool = False  # SIGSTOPped until a timer sends SIGCONT

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
class Abandoned:
    """A worker that left its jobs behind: SIGKILLed, or SIGTERMed while cut off from the server."""

    pid: int
    mode: str
    how: str  # "kill" or "partition"
    open_runs: int  # runs started in that process with no end record at the time


@dataclass
class Fleet:
    """A fixed number of sync and async worker processes on one queue, kept at strength."""

    proxy: TcpProxy
    queue: str
    runs_dir: Path
    logs_dir: Path
    settings: dict[str, Any]
    exit_grace: float
    procs: list[Proc] = field(default_factory=list)
    abandoned: list[Abandoned] = field(default_factory=list)
    term_exits: list[TermExit] = field(default_factory=list)
    _watchers: list[threading.Thread] = field(default_factory=list)
    _thaws: list[threading.Timer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def shutdown_timeout(self) -> float:
        return float(self.settings["worker"]["shutdown_timeout"])

    def spawn(self, mode: str) -> Proc:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "queue"), str(ROOT), env.get("PYTHONPATH", "")])
        log = self.logs_dir / f"{mode}-{len(self.procs)}.log"
        port = self.proxy.listen()
        argv = [sys.executable, str(SCRIPT), mode, self.proxy.url(port), self.queue, str(self.runs_dir),
                json.dumps(self.settings)]  # fmt: skip
        with log.open("wb") as out:
            popen = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(mode, popen, log, port, self.runs_dir / f"{popen.pid}.runs")
        self.procs.append(proc)
        return proc

    def wait_started(self, timeout: float) -> None:
        """Until every worker process has opened its run record (it is about to run its worker)."""
        deadline = time.monotonic() + timeout
        while not all(p.runs.exists() for p in self.procs) and time.monotonic() < deadline:
            time.sleep(0.05)

    def living(self) -> list[Proc]:
        """Running workers the test may signal (not frozen: a SIGTERM would wait for the thaw)."""
        return [p for p in self.procs if p.signalled is None and not p.frozen and p.alive()]

    def crashed(self) -> list[Proc]:
        """Processes that exited although the test never signalled them."""
        return [p for p in self.procs if p.signalled is None and not p.alive()]

    def busiest(self, rng: random.Random, mode: str | None = None) -> Proc:
        """The living worker (of `mode`, if given) with the most handler time still to run (ties at
        random): a shutdown with long handlers in progress is the case that must lose no lease."""
        living = [p for p in self.living() if mode in (None, p.mode)]
        rng.shuffle(living)
        return max(living, key=lambda p: remaining_work(p.runs))

    def kill_one(self, rng: random.Random) -> Abandoned:
        proc = rng.choice(self.living())
        proc.signalled = "kill"
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(30)
        gone = Abandoned(proc.pid, proc.mode, "kill", open_runs(proc.runs))
        self.abandoned.append(gone)
        self.spawn(proc.mode)
        return gone

    def term_one(self, rng: random.Random) -> Proc:
        proc = self.busiest(rng)
        self._term(proc)
        self.spawn(proc.mode)
        return proc

    def partition_one(self, rng: random.Random, hold: float) -> Proc:
        """Cut one worker off from the server, SIGTERM it, and let it reconnect only after `hold`
        seconds: it must still exit by its shutdown deadline."""
        proc = self.busiest(rng)
        self.proxy.block(proc.port)
        self._term(proc, how="partition")
        self.abandoned.append(Abandoned(proc.pid, proc.mode, "partition", open_runs(proc.runs)))
        timer = threading.Timer(hold, self.proxy.unblock, args=(proc.port,))
        timer.daemon = True
        timer.start()
        self.spawn(proc.mode)
        return proc

    def freeze_one(self, rng: random.Random, hold: float) -> Proc:
        """SIGSTOP the busiest asyncio worker (as in issue 7's CI run) for `hold` seconds: it is
        neither killed nor cut off."""
        proc = self.busiest(rng, "async")
        proc.frozen = True
        proc.popen.send_signal(signal.SIGSTOP)

        def thaw() -> None:
            proc.popen.send_signal(signal.SIGCONT)
            proc.frozen = False

        timer = threading.Timer(hold, thaw)
        timer.daemon = True
        timer.start()
        self._thaws.append(timer)
        return proc

    def _term(self, proc: Proc, how: str = "term") -> None:
        proc.signalled = how
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
        for thaw in self._thaws:
            thaw.join()
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


def remaining_work(path: Path) -> float:
    """Seconds of handler time still to run in a process's open runs (0 if none)."""
    now, started = time.time(), {}
    for event, job_id, *rest in read_runs(path):
        if event == "start":
            started[job_id] = float(rest[2]) + float(rest[3]) / 1000
        else:
            started.pop(job_id, None)
    return max([0.0, *(end - now for end in started.values())])


def read_runs(path: Path) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.split() for line in text.splitlines() if line.strip()]
