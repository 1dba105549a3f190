"""The one interface every library adapter implements (runs inside the library's venv).

A job's payload is ``{"id": <our id>, "pad": "x..."}`` (about ``PAYLOAD_BYTES`` of JSON), the
handler is a no-op that sleeps ``SLEEP`` seconds when a crash scenario asks for in-flight work,
and every completion is appended to a log file as ``<id> <handler start time>`` by one
``os.write`` (atomic for short lines with O_APPEND, survives SIGKILL of the worker).
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

PAYLOAD_BYTES = 64
SLEEP = 0.0
_LOG_FD: int | None = None


def payload(job_id: str) -> dict[str, str]:
    """The same small JSON payload for every library."""
    return {"id": job_id, "pad": "x" * max(0, PAYLOAD_BYTES - len(job_id) - 20)}


def open_log(path: str, sleep: float) -> None:
    """Where completions go, and how long each handler sleeps."""
    global _LOG_FD, SLEEP
    _LOG_FD = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    SLEEP = sleep


def done(job_id: str, started: float) -> None:
    """Record one completed handler call (its start time is what latency measures)."""
    assert _LOG_FD is not None
    os.write(_LOG_FD, f"{job_id} {started:.6f}\n".encode())


def sync_handler(data: dict[str, Any]) -> None:
    """The no-op handler for thread/process workers."""
    started = time.time()
    if SLEEP:
        time.sleep(SLEEP)
    done(data["id"], started)


async def async_handler(data: dict[str, Any]) -> None:
    """The no-op handler for asyncio workers."""
    started = time.time()
    if SLEEP:
        import asyncio  # noqa: PLC0415

        await asyncio.sleep(SLEEP)
    done(data["id"], started)


class PeerBase:
    """What the child process calls. Sync libraries override the sync methods, asyncio
    libraries the async ones; ``bulk`` is None when the library has no bulk enqueue API."""

    sync_enqueue = False
    async_enqueue = False
    bulk: str | None = None  # "sync" or "async"
    imports: tuple[str, ...] = ()  # imported by the "info" mode: a broken install shows there
    queue = "bench"

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        self.url, self.settings = url, settings

    def enqueue(self, job_id: str) -> None:
        raise NotImplementedError

    def enqueue_bulk(self, ids: list[str]) -> None:
        raise NotImplementedError

    async def aopen(self) -> None:
        """Connect inside the running event loop."""

    async def aclose(self) -> None:
        """Close what ``aopen`` opened."""

    async def aenqueue(self, job_id: str) -> None:
        raise NotImplementedError

    async def aenqueue_bulk(self, ids: list[str]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close sync connections."""

    def work(self, concurrency: int) -> None:
        """Run a worker until the process is killed."""
        raise NotImplementedError

    @staticmethod
    def versions() -> dict[str, str]:
        """Versions of the library and its Redis client."""
        return {}


def dist_versions(*names: str) -> dict[str, str]:
    """Installed versions of distributions (missing ones omitted)."""
    from importlib import metadata  # noqa: PLC0415

    out = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def shares(concurrency: int, processes: int) -> list[int]:
    """Slots per worker process: ``concurrency`` spread as evenly as it goes over at most
    ``processes`` processes (never an empty one), so a tuned row keeps the scenario's total."""
    n = max(1, min(processes, concurrency))
    return [concurrency // n + (i < concurrency % n) for i in range(n)]


def fork_each(slots: list[int], run: Callable[[int], None]) -> None:
    """Run ``run(share)`` in one forked child per entry of ``slots`` and wait for them all.
    The children stay in the worker's process group, which the harness kills as a whole."""
    children = []
    for share in slots:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(share)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
