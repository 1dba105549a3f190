"""lifecycle: create -> claim -> ack of one job at a time, by ``concurrency`` asyncio tasks.

Each task loops: ``enqueue`` one job, ``claim(1)``, ``ack`` the claimed job (three round
trips; the claimed job may be another task's). A lifecycle's latency runs from the start
of its job's enqueue call to the return of the ack of that same job; both instants are
recorded by job id and paired after the run, so a task may claim a job whose enqueue reply
another task has not read yet. Tasks start lifecycles until ``min_seconds`` have passed; the
clock covers all of them (``lifecycles`` records how many). Every ack is counted by job id.

Metrics: ``lifecycles_per_s``, ``lifecycles``, ``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms``.
Params: ``payload_bytes``, ``concurrency``, ``min_seconds``.
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
    run_async,
)
from bench.stats import latency_summary

NAME = "lifecycle"
NEEDS_CONVEYOR = True
HEADLINE = ("lifecycles_per_s",)
HEADLINE_CASE = {"metric": "lifecycles_per_s", "params": {"payload_bytes": 64, "concurrency": 8},
                 "conditions": "enqueue, claim and ack of one job at a time by 8 concurrent tasks, "
                               "64 B payload, RESP3, hiredis"}
DEFAULTS: dict[str, Any] = {"payloads": [64, 16384], "concurrencies": [1, 8, 32],
                            "min_seconds": 2.0, "variant_payload": 64, "variant_concurrency": 8}
QUICK: dict[str, Any] = {"payloads": [64, 16384], "concurrencies": [1, 32], "min_seconds": 0.3,
                         "variant_payload": 64, "variant_concurrency": 8}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """On the baseline, payloads at the variant concurrency and concurrencies at the variant
    payload (one dimension at a time); one row (64 B, concurrency 8) on other variants but
    listpack."""
    if variant.config == "listpack-1024":
        return []  # hash encoding shows in memory; enqueue-bulk covers its write cost
    p0, c0 = options["variant_payload"], options["variant_concurrency"]
    grid = [(p0, c0)]
    if variant.primary:
        grid += [(p, c0) for p in options["payloads"] if p != p0]
        grid += [(p0, c) for c in options["concurrencies"] if c != c0]
    return [{"payload_bytes": p, "concurrency": c, "min_seconds": options["min_seconds"]}
            for p, c in grid]


async def _measure(target: Target, params: dict[str, Any], tracker: Tracker) -> tuple:
    """Run the lifecycles; return (elapsed seconds, latencies)."""
    queue = make_async_queue(target, NAME, pool_size=params["concurrency"] + 2)
    payload = payload_of(params["payload_bytes"])
    await queue.cancel((await queue.enqueue("noop", payload)).id)  # connect + load scripts
    started: dict[str, float] = {}
    acked: dict[str, float] = {}
    start = time.perf_counter()
    deadline = start + params["min_seconds"]

    async def loop() -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            job = await queue.enqueue("noop", payload)
            started[job.id] = t0
            tracker.add([job.id])
            claimed: list[Any] = []
            while not claimed:
                claimed = await queue.claim(1)
            await queue.ack(claimed[0])
            acked[claimed[0].id] = time.perf_counter()
            tracker.handled(claimed[0].id)

    await asyncio.gather(*(loop() for _ in range(params["concurrency"])))
    elapsed = time.perf_counter() - start
    await acheck_counts(queue, waiting=0, active=0, total_completed=len(started))
    await queue.aclose()
    return elapsed, [acked[job_id] - t0 for job_id, t0 in started.items()]


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one grid row."""
    tracker = Tracker()
    preload_scripts(target.url)
    elapsed, latencies = run_async(target, _measure(target, params, tracker))
    report = tracker.verify()
    metrics = {"lifecycles_per_s": metric(len(latencies) / elapsed, "1/s"),
               "lifecycles": metric(len(latencies), "count")}
    metrics |= {k: metric(v, "ms")
                for k, v in latency_summary(latencies, (50, 95, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
