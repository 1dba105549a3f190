"""listing: what reading a page of waiting jobs costs every other client, with per-key limits.

``limit_keys`` limit keys (``Limit(concurrency=1)``) each run one job, claimed with a long lease
(untimed setup); with ``parked``, each key also holds one parked job, claimed behind its running
one. Then ``pages`` calls of ``jobs("waiting", limit=100)`` run back to back on a sync ``Queue``
while a separate probe process sends PING one at a time: a script call that holds the server
delays every PING sent meanwhile, so the probe's slowest PING shows the longest time no other
client was served. Each page must list what waits (100 parked jobs, or none; checked).

Metrics: ``page_p50_ms``, ``page_max_ms`` (one page, as the caller waits for it),
``probe_p50_ms``, ``probe_p99_ms``, ``probe_max_ms``. Params: ``limit_keys``, ``parked``, ``pages``.
Exactly-once does not apply (a read); ``extra`` records the probe's sample count.
"""

from __future__ import annotations

import time
from typing import Any

from bench.scenarios._common import Target, Variant, check_counts, make_queue, metric, preload_scripts
from bench.scenarios._ping_probe import PingProbe
from bench.stats import latency_summary

NAME = "listing"
NEEDS_CONVEYOR = True
HEADLINE = ("probe_max_ms",)
DEFAULTS: dict[str, Any] = {"limit_keys": [1000, 10000, 50000], "parked": [False, True], "pages": 20}
QUICK: dict[str, Any] = {"limit_keys": [1000], "parked": [True], "pages": 5}
PAGE = 100  # jobs per page, the library's default
LEASE = 3600.0  # the running jobs' lease: no recovery during the reads


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline only: the cost is the server's, not the client parser's."""
    if not variant.primary:
        return []
    return [{"limit_keys": k, "parked": p, "pages": options["pages"]}
            for k in options["limit_keys"] for p in options["parked"]]  # fmt: skip


def _occupy(queue: Any, keys: int) -> None:
    """One job per limit key enqueued, then claimed: it runs (holding the key's one slot) if the
    key ran none yet, else it is parked behind the running one."""
    from conveyor import JobSpec, Limit  # noqa: PLC0415 (deliberately lazy)

    for start in range(0, keys, 1000):
        queue.enqueue_many([JobSpec("noop", {"k": i}, limit=Limit(f"key-{i}", concurrency=1))
                            for i in range(start, min(start + 1000, keys))])  # fmt: skip
    for _ in range(keys // 1000 + 2):
        queue.claim(1000, lease=LEASE)


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one (limit_keys, parked) row."""
    keys, parked, pages = params["limit_keys"], params["parked"], params["pages"]
    queue = make_queue(target, NAME)
    _occupy(queue, keys)
    if parked:
        _occupy(queue, keys)
    check_counts(queue, active=keys, waiting=keys if parked else 0)
    probe = PingProbe(target)
    probe.start()
    preload_scripts(target.url)
    durations = []
    for _ in range(pages):
        t0 = time.perf_counter()
        listed = queue.jobs("waiting", limit=PAGE)
        durations.append(time.perf_counter() - t0)
        if len(listed) != (min(PAGE, keys) if parked else 0):
            raise AssertionError(f"a page listed {len(listed)} jobs with {keys} keys, parked={parked}")
    samples = probe.stop()
    queue.close()
    metrics = {k: metric(v, "ms") for k, v in latency_summary(durations, (50,), "page_").items()}
    metrics |= {k: metric(v, "ms") for k, v in latency_summary(samples, (50, 99), "probe_").items()}
    return {"metrics": metrics, "exactly_once": None, "extra": {"probe_samples": len(samples)}}
