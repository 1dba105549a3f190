"""process: drain pre-enqueued no-op jobs with ``AsyncWorker(burst=True)``.

The jobs are enqueued (in bulk, untimed) before the worker exists, so nothing is consumed
before the clock; the clock starts immediately before ``await worker.run()`` and stops when
it returns (burst mode returns once nothing is waiting or in flight). Every handler call
is counted by job id; the server's counts must show every job completed once.

Metrics: ``jobs_per_s``, ``elapsed_s``. Params: ``jobs``, ``concurrency``, ``payload_bytes``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.scenarios._common import (
    Target,
    Tracker,
    Variant,
    acheck_counts,
    fill,
    make_async_queue,
    make_queue,
    metric,
    preload_scripts,
)

NAME = "process"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
DEFAULTS: dict[str, Any] = {"jobs": 10000, "concurrencies": [1, 32, 100], "payload_bytes": 64}
QUICK: dict[str, Any] = {"jobs": 1000, "concurrencies": [1, 32, 100], "payload_bytes": 64}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every concurrency on the baseline; the highest only on other variants."""
    concs = options["concurrencies"] if variant.primary else options["concurrencies"][-1:]
    if variant.config == "listpack-1024":
        return []
    return [{"jobs": options["jobs"], "concurrency": c, "payload_bytes": options["payload_bytes"]}
            for c in concs]


async def drain(target: Target, name: str, params: dict[str, Any], tracker: Tracker) -> float:
    """Run a burst worker on queue ``name``; return the seconds it took."""
    from conveyor import AsyncWorker  # noqa: PLC0415 (deliberately lazy)

    queue = make_async_queue(target, NAME, name=name)

    async def noop(job: Any) -> None:
        tracker.handled(job.id)

    await acheck_counts(queue, waiting=params["jobs"], active=0)
    worker = AsyncWorker(queue, {"noop": noop}, concurrency=params["concurrency"], burst=True)
    start = time.perf_counter()
    await worker.run()
    elapsed = time.perf_counter() - start
    await acheck_counts(queue, waiting=0, active=0, total_completed=params["jobs"])
    await queue.aclose()
    return elapsed


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Enqueue, then drain with the clock running."""
    producer = make_queue(target, NAME)
    tracker = Tracker()
    tracker.add(fill(producer, params["jobs"], params["payload_bytes"]))
    producer.close()
    preload_scripts(target.url)
    elapsed = asyncio.run(drain(target, producer.name, params, tracker))
    report = tracker.verify()
    return {
        "metrics": {"jobs_per_s": metric(params["jobs"] / elapsed, "1/s"),
                    "elapsed_s": metric(elapsed, "s")},
        "exactly_once": report,
        "extra": {},
    }
