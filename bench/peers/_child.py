"""Child process for one library: ``python -m bench.peers._child SPEC.json OUT.json``.

Runs inside the library's own virtual environment, so it imports only the standard library
and the adapter. Modes: ``info`` (versions), ``enqueue`` (timed: sync, asyncio or bulk),
``fill`` (untimed backlog), ``worker`` (runs until killed), ``latency`` (one job in flight at a
time, waiting for each completion in the worker's log).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
from typing import Any

from bench.peers.adapters import _base

BATCH = 50


def _peer(spec: dict[str, Any]) -> Any:
    module = importlib.import_module(f"bench.peers.adapters.{spec['adapter']}")
    return module.Peer(spec["url"], spec.get("settings", {}))


def _chunks(ids: list[str], size: int) -> list[list[str]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)]


WARMUP = 5  # untimed calls first: connection set-up and script loading are not measured


def _warm(ids: list[str]) -> list[str]:
    return [f"warm-{i}-{ids[0]}" for i in range(WARMUP)] if ids else []


async def _aenqueue(peer: Any, ids: list[str], api: str, batch: int, warm: bool) -> float:
    await peer.aopen()
    try:
        for job_id in _warm(ids) if warm else []:
            await (peer.aenqueue_bulk([job_id]) if api == "bulk" else peer.aenqueue(job_id))
        if api == "bulk":
            chunks = _chunks(ids, batch)
            start = time.perf_counter()
            for chunk in chunks:
                await peer.aenqueue_bulk(chunk)
        else:
            start = time.perf_counter()
            for job_id in ids:
                await peer.aenqueue(job_id)
        return time.perf_counter() - start
    finally:
        await peer.aclose()


def _senqueue(peer: Any, ids: list[str], api: str, batch: int, warm: bool) -> float:
    try:
        for job_id in _warm(ids) if warm else []:
            peer.enqueue_bulk([job_id]) if api == "bulk" else peer.enqueue(job_id)
        if api == "bulk":
            chunks = _chunks(ids, batch)
            start = time.perf_counter()
            for chunk in chunks:
                peer.enqueue_bulk(chunk)
        else:
            start = time.perf_counter()
            for job_id in ids:
                peer.enqueue(job_id)
        return time.perf_counter() - start
    finally:
        peer.close()


def enqueue(peer: Any, ids: list[str], api: str, batch: int = BATCH, warm: bool = True) -> float:
    """Enqueue ``ids`` through ``api`` (sync, async or bulk); return the seconds taken."""
    asynchronous = peer.bulk == "async" if api == "bulk" else api == "async"
    if asynchronous:
        return asyncio.run(_aenqueue(peer, ids, api, batch, warm))
    return _senqueue(peer, ids, api, batch, warm)


def fill(peer: Any, ids: list[str]) -> None:
    """Untimed backlog: bulk when the library has it, else its fastest single API."""
    if peer.bulk:
        enqueue(peer, ids, "bulk", 500, warm=False)
    else:
        enqueue(peer, ids, "sync" if peer.sync_enqueue else "async", warm=False)


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


def latency(peer: Any, ids: list[str], log: str, timeout: float) -> dict[str, float]:
    """Enqueue one job at a time (the library's single API) and wait for it; return send times."""
    sent: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    if peer.sync_enqueue:
        for job_id in ids:
            sent[job_id] = time.time()
            peer.enqueue(job_id)
            _wait_for(log, job_id, deadline)
        peer.close()
        return sent

    async def go() -> None:
        await peer.aopen()
        for job_id in ids:
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
        out = {"elapsed": enqueue(peer, spec["ids"], spec["api"], spec.get("batch", BATCH))}
    elif mode == "fill":
        fill(peer, spec["ids"])
    elif mode == "latency":
        out = {"sent": latency(peer, spec["ids"], spec["log"], spec["wait_s"])}
    elif mode == "worker":
        _base.open_log(spec["log"], spec.get("sleep", 0.0))
        with open(out_path, "w") as fh:  # tells the parent the worker is up
            fh.write("{}")
        peer.work(spec["concurrency"])
        return
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(out, fh)
    os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
