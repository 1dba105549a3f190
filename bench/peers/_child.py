"""Child process for one library: ``python -m bench.peers._child SPEC.json OUT.json``.

Runs inside the library's own virtual environment, so it imports only the standard library
and the adapter. Modes: ``info`` (versions), ``enqueue`` (timed: sync, asyncio or bulk),
``fill`` (untimed backlog), ``worker`` (runs until killed; a row's ``processes`` setting
splits its concurrency over that many forked worker processes), ``latency`` (one job in flight
at a time, waiting for each completion in the worker's log).
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from bench.peers.adapters import _base

BATCH = 50


def _peer(spec: dict[str, Any]) -> Any:
    module = importlib.import_module(f"bench.peers.adapters.{spec['adapter']}")
    return module.Peer(spec["url"], spec.get("settings", {}))


WARMUP = 5  # untimed calls first: connection set-up and script loading are not measured


def _warm() -> list[str]:
    tag = f"{os.getpid()}-{time.time_ns()}"
    return [f"warm-{i}-{tag}" for i in range(WARMUP)]


def _calls(ids: Iterable[str], api: str, batch: int) -> Iterator[Any]:
    """What each call sends: one id, or a chunk of ``batch`` ids for the bulk API (lazily:
    a timed enqueue draws from an endless id stream)."""
    it = iter(ids)
    if api != "bulk":
        yield from it
        return
    while chunk := list(itertools.islice(it, batch)):
        yield chunk


def _deadline(min_seconds: float | None) -> float:
    return time.perf_counter() + min_seconds if min_seconds else float("inf")


async def _aenqueue(peer: Any, ids: Iterable[str], api: str, batch: int, *, warm: bool,
                    min_seconds: float | None) -> tuple[int, float, float]:
    await peer.aopen()
    try:
        for job_id in _warm() if warm else []:
            await (peer.aenqueue_bulk([job_id]) if api == "bulk" else peer.aenqueue(job_id))
        send = peer.aenqueue_bulk if api == "bulk" else peer.aenqueue
        sent, start, cpu = 0, time.perf_counter(), time.process_time()
        stop = _deadline(min_seconds)
        for call in _calls(ids, api, batch):
            await send(call)
            sent += len(call) if api == "bulk" else 1
            if time.perf_counter() >= stop:
                break
        return sent, time.perf_counter() - start, time.process_time() - cpu
    finally:
        await peer.aclose()


def _senqueue(peer: Any, ids: Iterable[str], api: str, batch: int, *, warm: bool,
              min_seconds: float | None) -> tuple[int, float, float]:
    try:
        for job_id in _warm() if warm else []:
            peer.enqueue_bulk([job_id]) if api == "bulk" else peer.enqueue(job_id)
        send = peer.enqueue_bulk if api == "bulk" else peer.enqueue
        sent, start, cpu = 0, time.perf_counter(), time.process_time()
        stop = _deadline(min_seconds)
        for call in _calls(ids, api, batch):
            send(call)
            sent += len(call) if api == "bulk" else 1
            if time.perf_counter() >= stop:
                break
        return sent, time.perf_counter() - start, time.process_time() - cpu
    finally:
        peer.close()


def enqueue(peer: Any, ids: Iterable[str], api: str, batch: int = BATCH, *, warm: bool = True,
            min_seconds: float | None = None) -> tuple[int, float, float]:
    """Enqueue ``ids`` through ``api`` (sync, async or bulk), stopping early once
    ``min_seconds`` have passed; return (jobs sent, seconds taken, CPU seconds used)."""
    asynchronous = peer.bulk == "async" if api == "bulk" else api == "async"
    if asynchronous:
        return asyncio.run(_aenqueue(peer, ids, api, batch, warm=warm, min_seconds=min_seconds))
    return _senqueue(peer, ids, api, batch, warm=warm, min_seconds=min_seconds)


def fill(peer: Any, ids: list[str], batch: int = 500) -> None:
    """Untimed backlog: bulk (calls of ``batch``) when the library has it, else its fastest
    single API."""
    if peer.bulk:
        enqueue(peer, ids, "bulk", batch, warm=False)
    else:
        enqueue(peer, ids, "sync" if peer.sync_enqueue else "async", warm=False)


def timed_ids(prefix: str) -> Iterator[str]:
    """Endless ids for a timed enqueue (it stops at its deadline)."""
    return (f"{prefix}-{i}" for i in itertools.count())


def _wait_for(log: str, job_id: str, deadline: float) -> None:
    """Poll the worker's log until ``job_id`` appears (latency mode keeps one job in flight)."""
    needle = f"{job_id} ".encode()
    with open(log, "rb") as fh:
        while time.monotonic() < deadline:
            line = fh.readline()
            if line.startswith(needle):
                return
            if not line:
                time.sleep(0.0002)
    raise TimeoutError(f"job {job_id} not done in time")


def latency(peer: Any, ids: list[str], log: str, timeout: float, *,
            budget_s: float | None = None, least: int = 0) -> dict[str, float]:
    """Enqueue one job at a time (the library's single API) and wait for it; return send
    times. With ``budget_s``, no job is sent after that many seconds once ``least`` are done
    (a library with a slow poll gives fewer samples instead of minutes of waiting)."""
    sent: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    enough = time.monotonic() + budget_s if budget_s else float("inf")

    def more() -> bool:
        return len(sent) < least or time.monotonic() < enough

    if peer.sync_enqueue:
        for job_id in ids:
            if not more():
                break
            sent[job_id] = time.time()
            peer.enqueue(job_id)
            _wait_for(log, job_id, deadline)
        peer.close()
        return sent

    async def go() -> None:
        await peer.aopen()
        for job_id in ids:
            if not more():
                break
            sent[job_id] = time.time()
            await peer.aenqueue(job_id)
            await asyncio.to_thread(_wait_for, log, job_id, deadline)
        await peer.aclose()

    asyncio.run(go())
    return sent


def main(spec_path: str, out_path: str) -> None:
    with open(spec_path) as fh:
        spec = json.load(fh)
    mode = spec["mode"]
    _base.PAYLOAD_BYTES = spec.get("payload_bytes", 64)
    peer = _peer(spec)
    out: dict[str, Any] = {}
    if mode == "info":
        for name in peer.imports:
            importlib.import_module(name)
        out = {"versions": peer.versions(), "sync_enqueue": peer.sync_enqueue,
               "async_enqueue": peer.async_enqueue, "bulk": peer.bulk}
    elif mode == "enqueue":
        seconds = spec.get("min_seconds")
        ids = spec.get("ids") or timed_ids(spec["prefix"])
        jobs, elapsed, cpu = enqueue(peer, ids, spec["api"], spec.get("batch", BATCH),
                                     min_seconds=seconds)
        out = {"jobs": jobs, "elapsed": elapsed, "cpu_s": cpu}
    elif mode == "fill":
        fill(peer, spec["ids"], spec.get("batch", 500))
    elif mode == "latency":
        out = {"sent": latency(peer, spec["ids"], spec["log"], spec["wait_s"],
                               budget_s=spec.get("budget_s"), least=spec.get("least", 0))}
    elif mode == "worker":
        _base.open_log(spec["log"], spec.get("sleep", 0.0))
        with open(out_path, "w") as fh:  # tells the parent the worker is up
            fh.write("{}")
        slots = _base.shares(spec["concurrency"], spec.get("settings", {}).get("processes", 1))
        if len(slots) == 1:
            peer.work(slots[0])
        else:  # each process builds its own client after the fork
            for name in peer.imports:  # imported once, before: no process is still importing
                importlib.import_module(name)  # its library while the timed drain runs
            _base.fork_each(slots, lambda share: _peer(spec).work(share))
        return
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(out, fh)
    os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
