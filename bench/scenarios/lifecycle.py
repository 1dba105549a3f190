"""lifecycle: create -> claim -> ack of one job at a time, by ``concurrency`` asyncio tasks.

Each task loops: ``enqueue`` one job, ``claim(1)``, ``ack`` the claimed job (three round
trips; the claimed job may be another task's). A lifecycle's latency runs from the start
of its job's enqueue call to the return of the ack of that same job. ``tasks`` lifecycles
per row; the clock covers all of them. Every ack is counted by job id.

Metrics: ``lifecycles_per_s``, ``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms``.
Params: ``payload_bytes``, ``concurrency``, ``tasks``.
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
    make_async_queue,
    metric,
    payload_of,
    preload_scripts,
)
from bench.stats import latency_summary

NAME = "lifecycle"
NEEDS_CONVEYOR = True
HEADLINE = ("lifecycles_per_s",)
DEFAULTS: dict[str, Any] = {"payloads": [64, 1024, 16384], "concurrencies": [1, 8, 32],
                            "tasks": 500, "variant_payload": 64, "variant_concurrency": 8}
QUICK: dict[str, Any] = {"payloads": [64, 16384], "concurrencies": [1, 32], "tasks": 100,
                         "variant_payload": 64, "variant_concurrency": 8}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Full grid on the baseline; one row (64 B, concurrency 8) on other variants."""
    if variant.primary:
        grid = [(p, c) for p in options["payloads"] for c in options["concurrencies"]]
    else:
        grid = [(options["variant_payload"], options["variant_concurrency"])]
    return [{"payload_bytes": p, "concurrency": c, "tasks": options["tasks"]} for p, c in grid]


async def _measure(target: Target, params: dict[str, Any], tracker: Tracker) -> tuple:
    """Run the lifecycles; return (elapsed seconds, latencies)."""
    queue = make_async_queue(target, NAME, pool_size=params["concurrency"] + 2)
    payload = payload_of(params["payload_bytes"])
    await queue.cancel((await queue.enqueue("noop", payload)).id)  # connect + load scripts
    started: dict[str, float] = {}
    latencies: list[float] = []
    remaining = [params["tasks"]]

    async def loop() -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            t0 = time.perf_counter()
            job = await queue.enqueue("noop", payload)
            started[job.id] = t0
            tracker.add([job.id])
            claimed: list[Any] = []
            while not claimed:
                claimed = await queue.claim(1)
            await queue.ack(claimed[0])
            latencies.append(time.perf_counter() - started[claimed[0].id])
            tracker.handled(claimed[0].id)

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(params["concurrency"])))
    elapsed = time.perf_counter() - start
    await acheck_counts(queue, waiting=0, active=0, total_completed=params["tasks"])
    await queue.aclose()
    return elapsed, latencies


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one grid row."""
    tracker = Tracker()
    preload_scripts(target.url)
    elapsed, latencies = asyncio.run(_measure(target, params, tracker))
    report = tracker.verify()
    metrics = {"lifecycles_per_s": metric(params["tasks"] / elapsed, "1/s")}
    metrics |= {k: metric(v, "ms")
                for k, v in latency_summary(latencies, (50, 95, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
