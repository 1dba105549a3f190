"""Driving one library's child processes: calls with a timeout, workers that are killed.

Every call is a fresh process of the library's own interpreter (``python -m
bench.peers._child``). A call that overruns its timeout is killed (its whole process group)
and raised as :class:`Hung`; a worker is always killed with SIGKILL of its process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from bench.peers import Library
from bench.peers.venvs import REPO_ROOT


class ChildFailed(RuntimeError):
    """The child exited with an error; the message is the end of its stderr."""


class Hung(ChildFailed):
    """The child overran its timeout and was killed."""


def _env(lib: Library) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    paths = [str(REPO_ROOT)] + ([str(REPO_ROOT / "queue")] if lib.name == "conveyor" else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group (workers may have forked) and reap the leader."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Child:
    """Runs modes of the child for one library row."""

    def __init__(self, lib: Library, python: str, url: str, settings: dict[str, Any],
                 payload_bytes: int = 64) -> None:
        self.lib, self.python, self.url = lib, python, url
        self.settings, self.payload_bytes = settings, payload_bytes
        self.tmp = Path(tempfile.mkdtemp(prefix=f"peer-{lib.name}-"))
        # Specs, outputs and completion logs are read while the child object lives; without this
        # a full peer run left about a thousand directories in /tmp.
        weakref.finalize(self, shutil.rmtree, self.tmp, ignore_errors=True)
        self._n = 0

    def _spec(self, mode: str, **extra: Any) -> tuple[list[str], Path]:
        self._n += 1
        spec = self.tmp / f"spec-{self._n}.json"
        out = self.tmp / f"out-{self._n}.json"
        spec.write_text(json.dumps({"mode": mode, "adapter": self.lib.adapter, "url": self.url,
                                    "settings": self.settings,
                                    "payload_bytes": self.payload_bytes, **extra}))
        return [self.python, "-m", "bench.peers._child", str(spec), str(out)], out

    def _popen(self, cmd: list[str], stderr: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, env=_env(self.lib), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)

    def call(self, mode: str, timeout: float, **extra: Any) -> dict[str, Any]:
        """Run one mode to completion; return its JSON output."""
        cmd, out = self._spec(mode, **extra)
        err = self.tmp / f"err-{self._n}.txt"
        with err.open("w") as fh:
            proc = self._popen(cmd, fh)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
                raise Hung(f"{mode} did not finish within {timeout:.0f} s: killed") from None
        if proc.returncode != 0 or not out.exists():
            raise ChildFailed(f"{mode} exited with {proc.returncode}: {_tail(err)}")
        result: dict[str, Any] = json.loads(out.read_text())
        return result

    def start_worker(self, concurrency: int, log: Path, sleep: float = 0.0,
                     timeout: float = 60.0) -> Worker:
        """Start a worker process appending completions to ``log``; wait until it is up."""
        cmd, out = self._spec("worker", concurrency=concurrency, log=str(log), sleep=sleep)
        err = self.tmp / f"err-{self._n}.txt"
        with err.open("w") as fh:
            proc = self._popen(cmd, fh)
        worker = Worker(proc, err)
        deadline = time.monotonic() + timeout
        while not out.exists():
            if proc.poll() is not None:
                raise ChildFailed(f"worker exited with {proc.returncode}: {_tail(err)}")
            if time.monotonic() > deadline:
                worker.kill()
                raise Hung(f"worker did not start within {timeout:.0f} s: killed")
            time.sleep(0.02)
        return worker


class Worker:
    """A running worker process group."""

    def __init__(self, proc: subprocess.Popen[Any], err: Path) -> None:
        self.proc, self.err = proc, err

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        _kill(self.proc)

    def error(self) -> str:
        return f"worker exited with {self.proc.returncode}: {_tail(self.err)}"


def _tail(path: Path, limit: int = 600) -> str:
    """The informative end of a child's stderr."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (" | ".join(lines[-3:]))[-limit:] if lines else "(no output)"


def read_log(path: Path) -> list[tuple[str, float]]:
    """Completions recorded so far: (id, handler start time)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((parts[0].decode(), float(parts[1])))
    return out


def count_lines(path: Path) -> int:
    """Completed handler calls so far (cheap)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(path: Path, n: int, timeout: float, worker: Worker | None = None,
             poll: float = 0.05) -> bool:
    """Wait until ``path`` holds ``n`` completions; False on timeout or a dead worker."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if count_lines(path) >= n:
            return True
        if worker is not None and not worker.alive():
            return False
        time.sleep(poll)
    return count_lines(path) >= n
