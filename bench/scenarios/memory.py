"""memory: server memory per waiting job, as the slope of ``used_memory`` over job counts.

For each payload size a fresh, empty database is filled with waiting jobs in bulk; after
reaching each count in ``counts`` (cumulative) ``INFO memory`` is read, after a full collection
of the server's Lua heap (``_common.used_memory``: Redis 8 counts that heap's garbage). The
least-squares slope of used_memory over the counts is ``bytes_per_job`` (so fixed overheads
cancel out). A sampled job hash's ``OBJECT ENCODING`` (``DEBUG OBJECT`` on Dragonfly) and
``MEMORY USAGE`` are recorded in ``extra``. Runs on the ``default`` and ``listpack-1024`` configurations.
Memory is nearly deterministic, so this scenario caps its repetitions (``MAX_REPETITIONS``)
and skips the warm-up; the row's ``method`` records what was used.

One more case on the baseline measures the deduplication window (``dedup_window``): jobs with
caller-given ids of ``id_bytes`` bytes are enqueued, claimed and acked in batches (completed jobs
are not retained, so only the window's entries remain), and ``bytes_per_retained_id`` is the
slope of used_memory over the number of retained ids; ``MEMORY USAGE`` of the window's key per
id is in ``extra``.

Metrics: ``bytes_per_job``, ``used_memory_max_bytes`` (payload cases); ``bytes_per_retained_id``,
``used_memory_max_bytes`` (dedup case). Params: ``payload_bytes`` or ``id_bytes``, ``counts``.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios._common import Target, Variant, fill, flush_sync, make_queue, metric, used_memory
from bench.stats import slope

NAME = "memory"
NEEDS_CONVEYOR = True
HEADLINE = ("bytes_per_job",)
HEADLINE_CASE = {"metric": "bytes_per_job", "params": {"payload_bytes": 256},
                 "conditions": "waiting jobs with a 256 B JSON payload, default configuration"}
MAX_REPETITIONS = 3
WARMUP = 0
DEFAULTS: dict[str, Any] = {"payloads": [32, 256, 1024, 4096], "counts": [1000, 10000, 50000],
                            "id_bytes": 16}
QUICK: dict[str, Any] = {"payloads": [32, 1024], "counts": [100, 1000, 3000], "id_bytes": 16}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline and listpack-1024 (hashtag-mode Dragonfly too); default client only."""
    if not (variant.primary or (variant.config == "listpack-1024" and variant.protocol == 3
                                and variant.parser == "hiredis")):
        return []
    out = [{"payload_bytes": p, "counts": options["counts"]} for p in options["payloads"]]
    if variant.primary and options.get("id_bytes"):
        out.append({"id_bytes": options["id_bytes"], "counts": options["counts"]})
    return out


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


def finish_with_ids(queue: Any, start: int, count: int, id_bytes: int) -> None:
    """Enqueue, claim and ack ``count`` jobs whose caller-given ids are ``id_bytes`` long."""
    from conveyor import JobSpec  # noqa: PLC0415 (deliberately lazy)

    for first in range(start, start + count, 1000):
        last = min(first + 1000, start + count)
        queue.enqueue_many([JobSpec("noop", None, job_id="d" + f"{i:0{id_bytes - 1}d}")
                            for i in range(first, last)])
        claimed = queue.claim(last - first)
        statuses, _, _ = queue._run(queue.core.ack(claimed))  # one script call per 1000 acks
        if set(statuses) != {1}:
            raise AssertionError(f"acks refused: {statuses}")


def run_dedup(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Finish jobs to each count with a window longer than the case, read used_memory, fit."""
    admin = target.redis()
    flush_sync(admin)
    queue = make_queue(target, NAME, keep_completed=0, dedup_window=3600.0)
    points: list[tuple[int, int]] = []
    done = 0
    for count in params["counts"]:
        finish_with_ids(queue, done, count - done, params["id_bytes"])
        done = count
        points.append((count, used_memory(admin)))
    retained = int(admin.zcard(queue.core.keys.dedup))
    if retained != done:
        raise AssertionError(f"{retained} ids retained in the window, {done} jobs finished")
    sample = encoding(admin, queue.core.keys.dedup, target.family)
    usage = sample.get("memory_usage_bytes")
    sample["memory_usage_per_id_bytes"] = None if usage is None else usage / done
    return fitted("bytes_per_retained_id", points, sample, admin, queue)


def fitted(name: str, points: list[tuple[int, int]], sample: dict[str, Any], admin: Any,
           queue: Any) -> dict[str, Any]:
    """The row: slope of used_memory over the counts as ``name``; flushes and closes."""
    per_item = slope([p[0] for p in points], [p[1] for p in points])
    flush_sync(admin)
    admin.close()
    queue.close()
    return {
        "metrics": {name: metric(per_item, "B"),
                    "used_memory_max_bytes": metric(points[-1][1], "B")},
        "exactly_once": None,
        "extra": {**sample, "points": points},
    }


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Fill to each count, read used_memory, fit the slope."""
    if "id_bytes" in params:
        return run_dedup(target, params)
    admin = target.redis()
    flush_sync(admin)  # the runner flushes only between repetitions; cases share one process
    queue = make_queue(target, NAME, keep_completed=0)
    ids: list[str] = []
    points: list[tuple[int, int]] = []
    for count in params["counts"]:
        ids += fill(queue, count - len(ids), params["payload_bytes"])
        points.append((count, used_memory(admin)))
    waiting = queue.counts()["waiting"]
    if waiting != len(ids):
        raise AssertionError(f"{waiting} jobs waiting, {len(ids)} enqueued")
    sample = encoding(admin, queue.core.keys.job(ids[len(ids) // 2]), target.family)
    return fitted("bytes_per_job", points, sample, admin, queue)
