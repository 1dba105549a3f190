"""maintenance: drain a fully due delayed backlog with ``Queue.promote(batch)`` sweeps.

``backlog`` jobs are enqueued with a short delay (untimed) and the scenario waits until all
are due. Then ``CONFIG RESETSTAT`` and sweeps run back to back until every job is promoted;
a separate probe process sends PING one at a time meanwhile (what a sweep costs every other
client). Each sweep must move at most ``batch`` jobs (checked). Exactly-once: the waiting
list must then hold every delayed job exactly once (``acked`` counts jobs found there).

Metrics: ``sweeps``, ``items_per_s``, ``sweep_p50_ms``, ``sweep_p95_ms``, ``sweep_p99_ms``,
``sweep_max_ms``, ``server_usec_per_sweep`` (INFO commandstats, evalsha usec / calls),
``probe_p50_ms``, ``probe_p99_ms``, ``probe_max_ms``. Params: ``backlog``, ``batch``.
"""

from __future__ import annotations

import time
from typing import Any

from bench.scenarios._common import (
    Target,
    Variant,
    check_counts,
    fill,
    make_queue,
    metric,
    preload_scripts,
)
from bench.scenarios._ping_probe import PingProbe
from bench.scenarios.enqueue_single import verify_stored
from bench.stats import latency_summary

NAME = "maintenance"
NEEDS_CONVEYOR = True
HEADLINE = ("items_per_s",)
HEADLINE_CASE = {"metric": "items_per_s", "params": {"backlog": 10000, "batch": 100},
                 "conditions": "10,000 due delayed jobs promoted in sweeps of 100 (the library's "
                               "default maintenance_batch)"}
DEFAULTS: dict[str, Any] = {"backlogs": [10000], "batches": [10, 100, 1000]}
QUICK: dict[str, Any] = {"backlogs": [1000], "batches": [10, 1000]}
DELAY_S = 0.2


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline only: promotion cost does not depend on the client parser."""
    if not variant.primary:
        return []
    return [{"backlog": n, "batch": b} for n in options["backlogs"] for b in options["batches"]]


def _evalsha_usec(client: Any) -> tuple[int, float] | None:
    """(calls, usec) of EVALSHA since the last CONFIG RESETSTAT, if the server reports it."""
    stats = client.info("commandstats")
    row = stats.get("cmdstat_evalsha")
    if not row:
        return None
    return int(row["calls"]), float(row["usec"])


def _sweeps(queue: Any, backlog: int, batch: int) -> list[float]:
    """Promote until the backlog is gone; return per-sweep durations."""
    durations, moved = [], 0
    limit = backlog // batch + backlog + 10
    while moved < backlog:
        t0 = time.perf_counter()
        n = queue.promote(batch)
        durations.append(time.perf_counter() - t0)
        if n > batch:
            raise AssertionError(f"a sweep moved {n} jobs, more than its batch of {batch}")
        moved += n
        if len(durations) > limit:
            raise AssertionError(f"{len(durations)} sweeps moved only {moved} of {backlog} jobs")
    return durations


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one (backlog, batch) row."""
    backlog, batch = params["backlog"], params["batch"]
    queue = make_queue(target, NAME)
    ids = fill(queue, backlog, 64, delay=DELAY_S)
    check_counts(queue, delayed=backlog, waiting=0)
    time.sleep(DELAY_S + 0.05)
    probe = PingProbe(target)
    probe.start()
    admin = target.redis()
    preload_scripts(target.url)
    admin.config_resetstat()
    start = time.perf_counter()
    durations = _sweeps(queue, backlog, batch)
    elapsed = time.perf_counter() - start
    server = _evalsha_usec(admin)
    samples = probe.stop()
    report = verify_stored(queue, ids)
    admin.close()
    queue.close()
    metrics = {"sweeps": metric(len(durations), "count"),
               "items_per_s": metric(backlog / elapsed, "1/s")}
    metrics |= {k: metric(v, "ms")
                for k, v in latency_summary(durations, (50, 95, 99), "sweep_").items()}
    metrics |= {k: metric(v, "ms")
                for k, v in latency_summary(samples, (50, 99), "probe_").items()}
    extra: dict[str, Any] = {"probe_samples": len(samples)}
    if server:
        metrics["server_usec_per_sweep"] = metric(server[1] / max(server[0], 1), "us")
        extra["evalsha_calls"] = server[0]
    return {"metrics": metrics, "exactly_once": report, "extra": extra}
