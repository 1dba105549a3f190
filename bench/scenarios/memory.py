"""memory: server memory per waiting job, as the slope of ``used_memory`` over job counts.

For each payload size a fresh, empty database is filled with waiting jobs in bulk; after
reaching each count in ``counts`` (cumulative) ``INFO memory`` is read. The least-squares slope
of used_memory over the counts is ``bytes_per_job`` (so fixed overheads cancel out). A
sampled job hash's ``OBJECT ENCODING`` (``DEBUG OBJECT`` on Dragonfly) and ``MEMORY USAGE``
are recorded in ``extra``. Runs on the ``default`` and ``listpack-1024`` configurations.
Memory is nearly deterministic, so this scenario caps its repetitions (``MAX_REPETITIONS``)
and skips the warm-up; the row's ``method`` records what was used.

Metrics: ``bytes_per_job``, ``used_memory_max_bytes``. Params: ``payload_bytes``, ``counts``.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios._common import Target, Variant, fill, flush_sync, make_queue, metric
from bench.stats import slope

NAME = "memory"
NEEDS_CONVEYOR = True
HEADLINE = ("bytes_per_job",)
HEADLINE_CASE = {"metric": "bytes_per_job", "params": {"payload_bytes": 256},
                 "conditions": "waiting jobs with a 256 B JSON payload, default configuration"}
MAX_REPETITIONS = 3
WARMUP = 0
DEFAULTS: dict[str, Any] = {"payloads": [32, 256, 1024, 4096], "counts": [1000, 10000, 50000]}
QUICK: dict[str, Any] = {"payloads": [32, 1024], "counts": [100, 1000, 3000]}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline and listpack-1024 (hashtag-mode Dragonfly too); default client only."""
    if not (variant.primary or (variant.config == "listpack-1024" and variant.protocol == 3
                                and variant.parser == "hiredis")):
        return []
    return [{"payload_bytes": p, "counts": options["counts"]} for p in options["payloads"]]


def _text(value: Any) -> str:
    """bytes or str -> str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def encoding(client: Any, key: str, family: str) -> dict[str, Any]:
    """Encoding and MEMORY USAGE of ``key`` where the server reports them."""
    out: dict[str, Any] = {"sample_key_type": _text(client.type(key))}
    try:
        if family == "dragonfly":
            debug = client.debug_object(key)
            out["encoding"] = _text(debug.get("encoding")) if isinstance(debug, dict) else None
        else:
            out["encoding"] = _text(client.object("encoding", key))
    except Exception as exc:
        out["encoding"] = None
        out["encoding_error"] = f"{type(exc).__name__}: {exc}"
    try:
        out["memory_usage_bytes"] = int(client.memory_usage(key, samples=0))
    except Exception as exc:
        out["memory_usage_error"] = f"{type(exc).__name__}: {exc}"
    return out


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Fill to each count, read used_memory, fit the slope."""
    admin = target.redis()
    flush_sync(admin)  # the runner flushes only between repetitions; cases share one process
    queue = make_queue(target, NAME, keep_completed=0)
    ids: list[str] = []
    points: list[tuple[int, int]] = []
    for count in params["counts"]:
        ids += fill(queue, count - len(ids), params["payload_bytes"])
        points.append((count, int(admin.info("memory")["used_memory"])))
    waiting = queue.counts()["waiting"]
    if waiting != len(ids):
        raise AssertionError(f"{waiting} jobs waiting, {len(ids)} enqueued")
    sample = encoding(admin, queue.core.keys.job(ids[len(ids) // 2]), target.family)
    per_job = slope([p[0] for p in points], [p[1] for p in points])
    flush_sync(admin)
    admin.close()
    queue.close()
    return {
        "metrics": {"bytes_per_job": metric(per_job, "B"),
                    "used_memory_max_bytes": metric(points[-1][1], "B")},
        "exactly_once": None,
        "extra": {**sample, "points": points},
    }
