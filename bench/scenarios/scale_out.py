"""scale-out: queues spread over a Redis Cluster's shards, and the cost of ``wait_replicas``.

Each repetition starts its own topology from the target's binaries (``bench.topologies``); the
harness's single server stays idle meanwhile.

- ``topology: cluster``: 3 primaries with one replica each. ``queues`` queues are named so they
  land on the shards in turn (queue k on shard k mod 3); one asyncio producer per queue sends
  ``enqueue_many`` batches of ``batch`` jobs until ``min_seconds`` pass. Metrics: ``jobs_per_s``
  (all queues), ``shards_used``, ``shard_balance`` (slowest shard's jobs/s over the fastest's).
  Every server and the single client process share the machine's cores: on a small machine
  this measures the client and the shared CPU, not the cluster's capacity (see the docs page).
- ``topology: replicated``: one primary and one replica; one caller enqueues one job per call
  with ``wait_replicas`` 0 or 1 (WAIT on the same connection). Metrics: ``jobs_per_s``,
  ``p50_ms``, ``p99_ms``: what the durability setting costs per acknowledged enqueue.

Exactly-once: every id returned by an enqueue is in its queue's waiting list, once.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from bench.scenarios._common import Target, Variant, metric, queue_name, run_async, specs
from bench.scenarios.enqueue_single import one_at_a_time, verify_stored

NAME = "scale-out"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
MAX_REPETITIONS = 3  # every repetition starts a 6-node cluster or a replicated pair
WARMUP = 0
SHARDS = 3
DEFAULTS: dict[str, Any] = {"queues": [1, 2, 4, 8], "wait_replicas": [0, 1], "min_seconds": 2.0,
                            "batch": 50, "payload_bytes": 64}  # fmt: skip
QUICK: dict[str, Any] = {"queues": [1, 3], "wait_replicas": [0, 1], "min_seconds": 0.3,
                         "batch": 50, "payload_bytes": 64}  # fmt: skip


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline variant of Redis and Valkey only (Dragonfly's cluster mode is emulated)."""
    if not variant.primary or variant.family == "dragonfly":
        return []
    shared = {k: options[k] for k in ("min_seconds", "batch", "payload_bytes")}
    cluster = [{"topology": "cluster", "queues": n, **shared} for n in options["queues"]]
    durable = [{"topology": "replicated", "wait_replicas": w, **shared} for w in options["wait_replicas"]]
    return cluster + durable


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition on a freshly started topology."""
    if params["topology"] == "cluster":
        return _cluster(target, params)
    return _replicated(target, params)


# --------------------------------------------------------------------------- cluster


def spread_names(count: int, shards: int = SHARDS) -> list[str]:
    """Queue names whose hash slots fall on shard k mod ``shards`` (slots split evenly, in order)."""
    from redis.cluster import key_slot  # noqa: PLC0415 (deliberately lazy)

    from bench.topologies import CLUSTER_SLOTS  # noqa: PLC0415

    per = CLUSTER_SLOTS // shards
    names: list[str] = []
    while len(names) < count:
        name = queue_name(NAME)
        if min(key_slot(name.encode()) // per, shards - 1) == len(names) % shards:
            names.append(name)
    return names


def _cluster(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    from bench.topologies import start_cluster  # noqa: PLC0415 (deliberately lazy)

    names = spread_names(params["queues"])
    with start_cluster(target.server, primaries=SHARDS, node_timeout_ms=5000) as cluster:
        ids, elapsed = run_async(target, _produce(cluster.url, names, target, params))
        reports = [_verify(cluster.url, name, target, ids[name]) for name in names]
    per_shard: Counter[int] = Counter()
    for k, name in enumerate(names):
        per_shard[k % SHARDS] += len(ids[name])
    rates = [n / elapsed for n in per_shard.values()]
    total = sum(len(v) for v in ids.values())
    metrics = {"jobs_per_s": metric(total / elapsed, "1/s"),
               "shards_used": metric(len(per_shard), "count"),
               "shard_balance": metric(min(rates) / max(rates), "ratio")}  # fmt: skip
    return {"metrics": metrics, "exactly_once": _merge(reports), "extra": {}}


async def _produce(url: str, names: list[str], target: Target,
                   params: dict[str, Any]) -> tuple[dict[str, list[str]], float]:  # fmt: skip
    from conveyor import AsyncQueue  # noqa: PLC0415 (deliberately lazy)

    queues = [AsyncQueue.from_url(url, name, **target.settings()) for name in names]
    batch = specs(params["batch"], params["payload_bytes"])
    for queue in queues:  # connect, read the slot map, load the script
        await queue.cancel((await queue.enqueue("noop", None)).id)
    ids: dict[str, list[str]] = {name: [] for name in names}
    start = time.perf_counter()
    deadline = start + params["min_seconds"]

    async def produce(queue: AsyncQueue) -> None:
        while time.perf_counter() < deadline:
            ids[queue.name].extend(job.id for job in await queue.enqueue_many(batch))

    await asyncio.gather(*(produce(q) for q in queues))
    elapsed = time.perf_counter() - start
    for queue in queues:
        await queue.aclose()
    return ids, elapsed


def _verify(url: str, name: str, target: Target, ids: list[str]) -> dict[str, Any]:
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    queue = Queue.from_url(url, name, **target.settings())
    try:
        return verify_stored(queue, ids)
    finally:
        queue.close()


def _merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    merged = {k: sum(r[k] for r in reports) for k in ("enqueued", "acked", "duplicates", "lost")}
    return {**merged, "ok": all(r["ok"] for r in reports)}


# --------------------------------------------------------------------------- replicated pair


def _replicated(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    import contextlib  # noqa: PLC0415

    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    from bench.servers import start_server  # noqa: PLC0415
    from bench.topologies import wait_until  # noqa: PLC0415

    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(start_server(target.server))
        args = ["--replicaof", primary.host, str(primary.port)]
        replica = stack.enter_context(start_server(target.server, extra_args=args))
        wait_until(lambda: _linked(replica), "the replica to sync")
        queue = Queue.from_url(primary.url, queue_name(NAME),
                               **target.settings(wait_replicas=params["wait_replicas"]))  # fmt: skip
        return one_at_a_time(queue, params)


def _linked(replica: Any) -> bool:
    with replica.client() as client:
        return bool(client.info("replication")["master_link_status"] == "up")
