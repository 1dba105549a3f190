"""enqueue-single: one ``Queue.enqueue`` call per job, one caller, sync client.

Metrics: ``jobs_per_s``; per-call latency ``p50_ms``, ``p99_ms``, ``max_ms``.
Params: ``jobs``, ``payload_bytes``. Exactly-once here means stored once: after the clock
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
)
from bench.stats import latency_summary

NAME = "enqueue-single"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
DEFAULTS: dict[str, Any] = {"jobs": 3000, "payload_bytes": 64}
QUICK: dict[str, Any] = {"jobs": 300, "payload_bytes": 64}


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
    queue = make_queue(target, NAME)
    payload = payload_of(params["payload_bytes"])
    queue.cancel(queue.enqueue("noop", payload).id)  # connect, check server, load script
    ids, lat = [], []
    start = time.perf_counter()
    for _ in range(params["jobs"]):
        t0 = time.perf_counter()
        ids.append(queue.enqueue("noop", payload).id)
        lat.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    report = verify_stored(queue, ids)
    queue.close()
    metrics = {"jobs_per_s": metric(len(ids) / elapsed, "1/s")}
    metrics |= {k: metric(v, "ms") for k, v in latency_summary(lat, (50, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
