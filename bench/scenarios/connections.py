"""connections: how many connections Conveyor opens, and what pool size does to producers.

Rows (``kind`` param):

- ``roles``: an ``AsyncWorker`` with ``concurrency`` slots is running (it has processed jobs);
  ``CLIENT LIST`` (from an observer connection, excluded) is grouped by client name
  ``conveyor:<queue>:<role>``; unnamed connections (the queue's command pool) count as
  ``other``. One row per worker concurrency in ``worker_concurrencies``. Metrics:
  ``connections_total``, ``connections_pump``, ``connections_waiter``, ``connections_maint``,
  ``connections_other``.
- ``queues``: a worker process over ``queues`` queues (the ``Runner`` behind ``conveyor worker
  -q``, thread workers, ``concurrency`` slots per queue) has processed jobs on every queue;
  ``CLIENT LIST`` grouped by role as for ``roles`` (a connection named after any of the queues
  counts under its role). One row per count in ``worker_queues``. Same metrics as ``roles``.
- ``memory``: ``connections`` idle client connections (redis-py, the target's protocol, one
  PING each) are opened; ``bytes_per_connection`` is the growth of the server's
  ``used_memory`` divided by their number (``connected_clients`` checks they were all there).
- ``pool``: ``concurrency`` asyncio producers enqueue one job per call through one
  ``AsyncQueue`` whose pool holds ``pool_size`` connections, for ``min_seconds``. Workers use
  their own role connections, so the pool bounds producers only. Metrics: ``jobs_per_s``,
  ``jobs``.
- ``too-small``: the same producers with ``pool_size=1`` and ``pool_timeout`` short, sending
  big batches: what the user sees. ``extra.exception_type`` / ``extra.exception_message``
  hold the first error; metric ``failed_calls``. Jobs of failed calls must not be stored,
  the others exactly once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

from bench.scenarios._common import (
    Target,
    Tracker,
    Variant,
    acheck_counts,
    check_counts,
    make_async_queue,
    metric,
    payload_of,
    queue_name,
    run_async,
    specs,
    used_memory,
)
from bench.scenarios.enqueue_single import verify_stored

NAME = "connections"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s", "connections_total", "failed_calls")
HEADLINE_CASE = {"metric": "connections_total", "params": {"kind": "roles", "concurrency": 32},
                 "conditions": "connections held by one AsyncWorker with concurrency 32 and its "
                               "queue"}
DEFAULTS: dict[str, Any] = {"pool_sizes": [2, 8, 16, 32], "concurrency": 32, "min_seconds": 2.0,
                            "worker_concurrencies": [1, 8, 32, 100], "small_pool_timeout": 0.05,
                            "idle_connections": 200, "worker_queues": [1, 3]}
QUICK: dict[str, Any] = {"pool_sizes": [2, 32], "concurrency": 32, "min_seconds": 0.3,
                         "worker_concurrencies": [1, 32], "small_pool_timeout": 0.05,
                         "idle_connections": 50, "worker_queues": [1, 3]}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline only."""
    if not variant.primary:
        return []
    c = options["concurrency"]
    rows: list[dict[str, Any]] = [{"kind": "roles", "concurrency": w}
                                  for w in options["worker_concurrencies"]]
    rows += [{"kind": "queues", "queues": n, "concurrency": c} for n in options["worker_queues"]]
    rows.append({"kind": "memory", "connections": options["idle_connections"]})
    rows += [{"kind": "pool", "pool_size": p, "concurrency": c,
              "min_seconds": options["min_seconds"]} for p in options["pool_sizes"]]
    rows.append({"kind": "too-small", "pool_size": 1, "concurrency": c,
                 "pool_timeout": options["small_pool_timeout"]})
    return rows


def _name(entry: dict[str, Any]) -> str:
    """Client name from a CLIENT LIST entry."""
    name = entry.get("name", "")
    return name.decode() if isinstance(name, bytes) else str(name)


async def _roles(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Connections by role while a worker runs."""
    from conveyor import AsyncWorker  # noqa: PLC0415 (deliberately lazy)

    queue = make_async_queue(target, NAME)
    tracker, seen = Tracker(), asyncio.Event()

    async def noop(job: Any) -> None:
        tracker.handled(job.id)
        seen.set()

    worker = AsyncWorker(queue, {"noop": noop}, concurrency=params["concurrency"])
    task = asyncio.create_task(worker.run())
    tracker.add([j.id for j in await queue.enqueue_many(specs(10, 64))])
    await asyncio.wait_for(seen.wait(), 10)
    entries = await _client_list(target, [f"conveyor:{queue.name}:maint"])
    worker.stop()
    await task
    await acheck_counts(queue, waiting=0, active=0, total_completed=10)
    await queue.aclose()
    return _by_role(entries, [queue.name], tracker)


def _by_role(entries: list[dict], queues: list[str], tracker: Tracker) -> dict[str, Any]:
    """A row's metrics: CLIENT LIST entries grouped by the role named after any of ``queues``."""
    prefixes = [f"conveyor:{q}:" for q in queues]

    def role(entry: dict) -> str:
        name = _name(entry)
        return next((name.removeprefix(p) for p in prefixes if name.startswith(p)), "other")

    roles = Counter(role(e) for e in entries)
    metrics = {"connections_total": metric(len(entries), "connections")}
    for role in ("pump", "waiter", "maint", "other"):
        metrics[f"connections_{role}"] = metric(roles.get(role, 0), "connections")
    names = sorted({_name(e) for e in entries})
    return {"metrics": metrics, "exactly_once": tracker.verify(),
            "extra": {"client_names": names, "roles": dict(roles)}}


async def _client_list(target: Target, wait_for: list[str], timeout: float = 5.0) -> list[dict]:
    """CLIENT LIST without the observer, once every name of ``wait_for`` is connected (or after
    timeout)."""
    observer = target.redis(client_name="bench:observer")
    deadline = time.monotonic() + timeout
    while True:
        entries = [e for e in observer.client_list() if _name(e) != "bench:observer"]
        if time.monotonic() > deadline or set(wait_for) <= {_name(e) for e in entries}:
            break
        await asyncio.sleep(0.05)
    observer.close()
    return entries


def _queues(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Connections by role while one worker process serves several queues."""
    from conveyor import Conveyor, current_job  # noqa: PLC0415 (deliberately lazy)
    from conveyor._runner import Runner  # noqa: PLC0415 (deliberately lazy)

    names = [queue_name(NAME) for _ in range(params["queues"])]
    app = Conveyor(target.url, **target.settings())
    tracker, lock, calls = Tracker(), threading.Lock(), [0]
    seen = threading.Event()

    def noop_of(name: str) -> Any:
        def noop() -> None:  # job ids count per queue: track them with their queue's name
            with lock:
                tracker.handled(f"{name}/{current_job().id}")
                calls[0] += 1
                if calls[0] >= 10 * len(names):
                    seen.set()

        return noop

    for i, name in enumerate(names):
        app.task(queue=name, name=f"noop{i}")(noop_of(name))
    runner = Runner(app, names, concurrency=params["concurrency"])
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    for i, name in enumerate(names):
        tracker.add([f"{name}/{app.enqueue(f'noop{i}').id}" for _ in range(10)])
    if not seen.wait(30):
        raise AssertionError("the jobs of every queue were not all processed within 30 s")
    entries = run_async(target, _client_list(target, [f"conveyor:{n}:maint" for n in names]))
    runner.stop()
    thread.join(30)
    for name in names:
        check_counts(app.queue(name), waiting=0, active=0, total_completed=10)
    app.close()
    return _by_role(entries, names, tracker)


async def _producers(queue: Any, params: dict[str, Any], batch: int, payload: int) -> tuple:
    """``concurrency`` tasks enqueueing (four calls each, or until ``min_seconds``);
    return (ids stored, errors, elapsed)."""
    ids: list[str] = []
    errors: list[BaseException] = []
    body = specs(batch, payload)
    start = time.perf_counter()
    deadline = start + params.get("min_seconds", 0.0)

    async def loop() -> None:
        calls = 0
        while calls < 4 or time.perf_counter() < deadline:
            calls += 1
            try:
                jobs = (await queue.enqueue_many(body) if batch > 1
                        else [await queue.enqueue("noop", payload_of(payload))])
                ids.extend(j.id for j in jobs)
            except Exception as exc:
                errors.append(exc)

    await asyncio.gather(*(loop() for _ in range(params["concurrency"])))
    return ids, errors, time.perf_counter() - start


async def _pool(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Producer throughput with a pool of ``pool_size`` (or the too-small case)."""
    small = params["kind"] == "too-small"
    settings: dict[str, Any] = {"pool_size": params["pool_size"]}
    if small:
        settings["pool_timeout"] = params["pool_timeout"]
    queue = make_async_queue(target, NAME, **settings)
    await queue.cancel((await queue.enqueue("noop", payload_of(64))).id)
    ids, errors, elapsed = await _producers(queue, params, 1000 if small else 1,
                                            1024 if small else 64)
    name = queue.name
    await queue.aclose()
    report = _verify(target, name, ids)
    if small:
        first = errors[0] if errors else None
        return {"metrics": {"failed_calls": metric(len(errors), "count")},
                "exactly_once": report,
                "extra": {"exception_type": type(first).__name__ if first else None,
                          "exception_module": type(first).__module__ if first else None,
                          "exception_message": str(first) if first else None}}
    if errors:
        raise errors[0]
    return {"metrics": {"jobs_per_s": metric(len(ids) / elapsed, "1/s"),
                        "jobs": metric(len(ids), "count")},
            "exactly_once": report, "extra": {}}


def _memory(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Server memory per idle client connection."""
    admin = target.redis(client_name="bench:observer")
    before = _memory_and_clients(admin)
    clients = [target.redis() for _ in range(params["connections"])]
    try:
        for client in clients:
            client.ping()
        after = _memory_and_clients(admin)
    finally:
        for client in clients:
            client.close()
        admin.close()
    opened = after[1] - before[1]
    if opened != params["connections"]:
        raise AssertionError(f"{opened} connections seen by the server, "
                             f"{params['connections']} opened")
    return {"metrics": {"bytes_per_connection": metric((after[0] - before[0]) / opened, "B")},
            "exactly_once": None,
            "extra": {"used_memory_before": before[0], "used_memory_after": after[0]}}


def _memory_and_clients(client: Any) -> tuple[int, int]:
    """(used_memory after a Lua collection, connected_clients) from INFO."""
    return used_memory(client), int(client.info("clients")["connected_clients"])


def _verify(target: Target, name: str, ids: list[str]) -> dict[str, Any]:
    """Stored-exactly-once check with a sync queue of the same name."""
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    queue = Queue.from_url(target.url, name, **target.settings())
    try:
        return verify_stored(queue, ids)
    finally:
        queue.close()


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one row."""
    if params["kind"] == "memory":
        return _memory(target, params)
    if params["kind"] == "queues":
        return _queues(target, params)
    fn = _roles if params["kind"] == "roles" else _pool
    return run_async(target, fn(target, params))
