"""enqueue-bulk: ``enqueue_many`` with batches of ``batch`` jobs (one script call each).

With ``producers`` 1, one synchronous ``Queue`` sends the batches one after another; with more,
that many asyncio tasks share one ``AsyncQueue`` (its pool holds one connection per producer),
as concurrent web requests would.

Batches go on until ``min_seconds`` have passed (every producer stops at the same deadline;
the clock stops when the last one returns; ``jobs`` records how many were stored).
Metrics: ``jobs_per_s``, ``batches_per_s``, ``jobs``; per-batch latency ``p50_ms``, ``p99_ms``,
``max_ms``; ``client_cpu_us_per_job`` (CPU time of the producer process over the timed batches,
per job). Params: ``min_seconds``, ``batch``, ``payload_bytes``, ``producers``.
Exactly-once as in enqueue-single (every id stored once).
"""

from __future__ import annotations

from typing import Any

from bench.scenarios._common import (
    Target,
    Variant,
    make_async_queue,
    make_queue,
    run_async,
    specs,
)
from bench.scenarios.enqueue_single import outcome, timed_calls, timed_tasks, verify_async

NAME = "enqueue-bulk"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
HEADLINE_CASE = {"metric": "jobs_per_s", "params": {"producers": 1, "batch": 50, "payload_bytes": 64},
                 "conditions": "one caller, batches of 50 jobs per call, 64 B payload, RESP3, "
                               "hiredis (like for like with enqueue-single)"}
DEFAULTS: dict[str, Any] = {"min_seconds": 2.0, "batch": 50, "payload_bytes": 64,
                            "producers": [1, 4]}
QUICK: dict[str, Any] = {"min_seconds": 0.3, "batch": 50, "payload_bytes": 64, "producers": [1, 4]}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every producer count on the baseline; one producer on the other variants."""
    counts = options["producers"] if variant.primary else options["producers"][:1]
    return [{**options, "producers": n} for n in counts]


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Enqueue ``jobs`` jobs in batches, from one producer or several concurrent ones."""
    if params.get("producers", 1) > 1:
        return run_async(target, run_concurrent(target, params))
    queue = make_queue(target, NAME)
    batch = specs(params["batch"], params["payload_bytes"])
    for job in queue.enqueue_many(batch[:1]):  # connect, check server, load script
        queue.cancel(job.id)
    return timed_calls(queue, params["min_seconds"], lambda: queue.enqueue_many(batch), per_batch=True)


async def run_concurrent(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """``producers`` asyncio tasks, each sending batches until ``jobs`` jobs are stored."""
    producers = params["producers"]
    queue = make_async_queue(target, NAME, pool_size=producers)
    batch = specs(params["batch"], params["payload_bytes"])
    for job in await queue.enqueue_many(batch[:1]):  # connect, check server, load script
        await queue.cancel(job.id)
    ids, lat, elapsed, cpu = await timed_tasks(producers, params["min_seconds"],
                                               lambda: queue.enqueue_many(batch))
    report = await verify_async(target, queue, ids)
    return outcome(ids, lat, elapsed, report, cpu, per_batch=True)
