"""enqueue-bulk: ``Queue.enqueue_many`` with batches of ``batch`` jobs (one script call each).

Metrics: ``jobs_per_s``, ``batches_per_s``; per-batch latency ``p50_ms``, ``p99_ms``, ``max_ms``.
Params: ``jobs``, ``batch``, ``payload_bytes``. Exactly-once as in enqueue-single (stored once).
"""

from __future__ import annotations

import time
from typing import Any

from bench.scenarios._common import Target, Variant, make_queue, metric, specs
from bench.scenarios.enqueue_single import verify_stored
from bench.stats import latency_summary

NAME = "enqueue-bulk"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
DEFAULTS: dict[str, Any] = {"jobs": 20000, "batch": 50, "payload_bytes": 64}
QUICK: dict[str, Any] = {"jobs": 2000, "batch": 50, "payload_bytes": 64}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every variant."""
    return [dict(options)]


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Enqueue ``jobs`` jobs in batches."""
    queue = make_queue(target, NAME)
    batch = specs(params["batch"], params["payload_bytes"])
    for job in queue.enqueue_many(batch[:1]):  # connect, check server, load script
        queue.cancel(job.id)
    ids: list[str] = []
    lat: list[float] = []
    start = time.perf_counter()
    while len(ids) < params["jobs"]:
        t0 = time.perf_counter()
        ids += [job.id for job in queue.enqueue_many(batch[: params["jobs"] - len(ids)])]
        lat.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    report = verify_stored(queue, ids)
    queue.close()
    metrics = {"jobs_per_s": metric(len(ids) / elapsed, "1/s"),
               "batches_per_s": metric(len(lat) / elapsed, "1/s")}
    metrics |= {k: metric(v, "ms") for k, v in latency_summary(lat, (50, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
