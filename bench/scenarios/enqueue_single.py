"""enqueue-single: one ``Queue.enqueue`` call per job, one caller, sync client.

Calls go on until ``min_seconds`` have passed (``jobs`` records how many were sent).
Metrics: ``jobs_per_s``, ``jobs``; per-call latency ``p50_ms``, ``p99_ms``, ``max_ms``.
Params: ``min_seconds``, ``payload_bytes``. Exactly-once here means stored once: after the clock
stops, the waiting list must hold exactly the returned ids, each once (``acked`` counts ids
found in the waiting list).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from bench.scenarios._common import (
    ExactlyOnceViolation,
    Target,
    Variant,
    make_queue,
    metric,
    payload_of,
    run_for,
)
from bench.stats import latency_summary

NAME = "enqueue-single"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
HEADLINE_CASE = {"metric": "jobs_per_s", "params": {"payload_bytes": 64},
                 "conditions": "one caller, one job per call, 64 B payload, RESP3, hiredis"}
DEFAULTS: dict[str, Any] = {"min_seconds": 2.0, "payload_bytes": 64}
QUICK: dict[str, Any] = {"min_seconds": 0.3, "payload_bytes": 64}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every variant except listpack (enqueue does not depend on hash encoding much)."""
    if variant.config == "listpack-1024":
        return []
    return [dict(options)]


def verify_stored(queue: Any, ids: list[str]) -> dict[str, Any]:
    """Check that the waiting list holds exactly ``ids``, each once."""
    raw = queue.client.lrange(queue.core.keys.waiting, 0, -1)
    stored = Counter(x.decode() if isinstance(x, bytes) else str(x) for x in raw)
    duplicates = sum(v - 1 for v in stored.values() if v > 1) + len(set(stored) - set(ids))
    lost = len(set(ids) - set(stored))
    report = {"enqueued": len(ids), "acked": sum(stored.values()), "duplicates": duplicates,
              "lost": lost, "ok": duplicates == 0 and lost == 0 and len(set(ids)) == len(ids)}
    if not report["ok"]:
        raise ExactlyOnceViolation(report)
    return report


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Enqueue ``jobs`` jobs one call at a time."""
    return one_at_a_time(make_queue(target, NAME), params)


def one_at_a_time(queue: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One caller enqueueing one job per call on ``queue`` for ``min_seconds`` (also used by
    the scale-out and tls scenarios on the topologies they start)."""
    payload = payload_of(params["payload_bytes"])
    queue.cancel(queue.enqueue("noop", payload).id)  # connect, check server, load script
    ids: list[str] = []
    lat: list[float] = []

    def one() -> int:
        t0 = time.perf_counter()
        ids.append(queue.enqueue("noop", payload).id)
        lat.append(time.perf_counter() - t0)
        return 1

    _, elapsed = run_for(params["min_seconds"], one)
    report = verify_stored(queue, ids)
    queue.close()
    metrics = {"jobs_per_s": metric(len(ids) / elapsed, "1/s"), "jobs": metric(len(ids), "count")}
    metrics |= {k: metric(v, "ms") for k, v in latency_summary(lat, (50, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
