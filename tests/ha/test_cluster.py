"""Conveyor on a real Redis Cluster: URL or client, queues on several shards, errors translated."""

from __future__ import annotations

import threading
import time

import pytest
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    ConveyorError,
    InvalidNameError,
    Job,
    Queue,
    Worker,
)
from redis.cluster import RedisCluster, key_slot

from bench.servers import start_server
from bench.topologies import Cluster


def _names_on_distinct_shards(cluster: Cluster, count: int) -> list[str]:
    """Queue names whose slots are served by `count` different primaries."""
    names: dict[int, str] = {}
    for i in range(10_000):
        name = f"shard-q{i}"
        owner = cluster.owner(key_slot(name.encode()))
        names.setdefault(owner.port, name)
        if len(names) == count:
            return list(names.values())
    raise AssertionError("could not spread queue names over the shards")


def test_every_key_of_a_queue_maps_to_one_slot(cluster: Cluster) -> None:
    queue = Queue.from_url(cluster.url, "slots")
    keys = queue.core.keys
    with cluster.nodes[0].client() as client:
        slots = {
            client.execute_command("CLUSTER", "KEYSLOT", key)
            for key in (keys.meta, keys.waiting, keys.delayed, keys.active, keys.completed,
                        keys.failed, keys.marker, keys.job("42"))
        }  # fmt: skip
    assert len(slots) == 1
    queue.close()


@pytest.mark.parametrize("bad", ["{evil}", "a}b", "x{"])
def test_a_prefix_or_name_that_would_defeat_the_hash_tag_is_rejected(cluster: Cluster, bad: str) -> None:
    with pytest.raises(InvalidNameError, match="hash tag"):
        Queue.from_url(cluster.url, "q", prefix=bad)
    with pytest.raises(InvalidNameError, match="hash tag"):
        Queue.from_url(cluster.url, bad)


def test_sync_workers_drain_queues_on_three_shards(cluster: Cluster) -> None:
    names = _names_on_distinct_shards(cluster, 3)
    for name in names:
        queue = Queue.from_url(cluster.url, name)
        queue.enqueue_many([("t", i) for i in range(40)])
        seen: list[int] = []
        worker = Worker(queue, {"t": lambda job: seen.append(job.payload)}, burst=True,
                        install_signal_handlers=False)  # fmt: skip
        assert worker.run()["processed"] == 40
        assert sorted(seen) == list(range(40))
        assert queue.counts()["total_completed"] == 40
        queue.close()


async def test_async_workers_drain_queues_on_three_shards(cluster: Cluster) -> None:
    for name in _names_on_distinct_shards(cluster, 3):
        queue = AsyncQueue.from_url(cluster.url, name + "-a")
        await queue.enqueue_many([("t", i) for i in range(40)])
        seen: list[int] = []

        async def handle(job: Job, seen: list[int] = seen) -> None:
            seen.append(job.payload)

        worker = AsyncWorker(queue, {"t": handle}, burst=True, install_signal_handlers=False)
        assert (await worker.run())["processed"] == 40
        assert sorted(seen) == list(range(40))
        await queue.aclose()


def test_a_cluster_client_can_be_passed_directly(cluster: Cluster) -> None:
    node = cluster.nodes[0]
    client = RedisCluster(host=node.host, port=node.port)
    queue = Queue("direct", client)
    job = queue.enqueue("t", {"x": 1})
    [claimed] = queue.claim()
    assert claimed.id == job.id
    queue.ack(claimed)
    assert queue.counts()["total_completed"] == 1
    client.close()


def test_idle_worker_stops_promptly_on_a_cluster(cluster: Cluster) -> None:
    """stop() unblocks the waiter on the queue's own node (CLIENT ID/UNBLOCK are per node)."""
    queue = Queue.from_url(cluster.url, "idle-stop")
    worker = Worker(queue, {"t": lambda job: None}, block_timeout=30, install_signal_handlers=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    time.sleep(1.0)  # let it block in BZPOPMIN
    started = time.monotonic()
    worker.stop()
    thread.join(20)
    assert not thread.is_alive()
    assert time.monotonic() - started < 10


def test_unreachable_cluster_is_a_connection_error_naming_the_nodes() -> None:
    with pytest.raises(ConnectionFailedError, match=r"127\.0\.0\.1:1"):
        Queue.from_url("redis+cluster://127.0.0.1:1", "q", connect_timeout=0.5)


def test_a_cluster_url_on_a_standalone_server_is_a_conveyor_error(cluster: Cluster) -> None:
    with start_server(cluster.nodes[0].kind) as single, pytest.raises(ConveyorError, match=r"[Cc]luster"):
        Queue.from_url(f"redis+cluster://{single.host}:{single.port}", "q")


def test_wait_replicas_on_a_cluster_is_refused_clearly(cluster: Cluster) -> None:
    with pytest.raises(ConveyorError, match="wait_replicas"):
        Queue.from_url(cluster.url, "q", wait_replicas=1)


def test_bad_cluster_urls_name_the_problem() -> None:
    with pytest.raises(InvalidNameError, match="host:port"):
        Queue.from_url("redis+cluster://nohostport", "q")
    with pytest.raises(InvalidNameError, match="scheme"):
        Queue.from_url("redis+clusterx://h:1", "q")


def test_queue_works_after_its_slot_moves_to_another_primary(cluster: Cluster) -> None:
    """MOVED is followed: migrate the queue's slot (and keys) to another shard mid-use."""
    name = "migrating"
    queue = Queue.from_url(cluster.url, name)
    queue.enqueue_many([("t", i) for i in range(5)])
    slot = key_slot(name.encode())
    source = cluster.owner(slot)
    target = next(s[0] for s in cluster.shards if s[0] is not source and s[0].running)
    _migrate_slot(source, target, slot)
    jobs = queue.claim(5)
    assert len(jobs) == 5
    for job in jobs:
        queue.ack(job)
    assert queue.counts()["total_completed"] == 5
    queue.close()


def _migrate_slot(source, target, slot: int) -> None:  # type: ignore[no-untyped-def]
    """The documented slot migration: IMPORTING/MIGRATING, MIGRATE the keys, SETSLOT NODE everywhere."""
    with source.client() as src, target.client() as dst:
        source_id = src.execute_command("CLUSTER", "MYID").decode()
        target_id = dst.execute_command("CLUSTER", "MYID").decode()
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        for client in (dst, src):
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
