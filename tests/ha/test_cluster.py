"""Conveyor on a real Redis Cluster: URL or client, queues on several shards, errors translated."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest
from _ha import async_wait_checked, too_many_replicas_refused
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    Conveyor,
    ConveyorError,
    InvalidNameError,
    Job,
    JobSpec,
    Limit,
    Queue,
    Worker,
)
from conveyor._runner import Runner
from redis.cluster import RedisCluster, key_slot

from bench.servers import start_server
from bench.topologies import Cluster


def _names_on_distinct_shards(
    cluster: Cluster, count: int, prefix: str = "shard-q", per: int = 1
) -> list[str]:
    """`per` queue names for each of `count` different primaries serving their slots."""
    names: dict[int, list[str]] = {}
    for i in range(10_000):
        name = f"{prefix}{i}"
        found = names.setdefault(cluster.owner(key_slot(name.encode())).port, [])
        if len(found) < per and (len(names) <= count):
            found.append(name)
        full = [v for v in names.values() if len(v) == per]
        if len(full) == count:
            return [name for v in full for name in v]
    raise AssertionError("could not spread queue names over the shards")


def test_every_key_of_a_queue_maps_to_one_slot(cluster: Cluster) -> None:
    queue = Queue.from_url(cluster.url, "slots")
    keys = queue.core.keys
    with cluster.nodes[0].client() as client:
        slots = {
            client.execute_command("CLUSTER", "KEYSLOT", key)
            for key in (keys.meta, keys.waiting, keys.delayed, keys.active, keys.completed,
                        keys.failed, keys.marker, keys.job("42"), keys.events, keys.results,
                        keys.result_index, keys.legacy_result("42"))
        }  # fmt: skip
    assert len(slots) == 1
    queue.close()


def test_priority_levels_and_key_limits_on_a_cluster(cluster: Cluster) -> None:
    """The keys the scripts derive (priority lists, limit counts, parked lists) share the slot."""
    queue = Queue.from_url(cluster.url, "levels-and-limits")
    low, high = queue.enqueue_many([JobSpec("t", 0), JobSpec("t", 1, priority=7)])
    limited = queue.enqueue_many([JobSpec("t", i, limit=Limit("k", concurrency=1)) for i in range(2)])
    claimed = queue.claim(count=4)
    assert [j.id for j in claimed] == [high.id, low.id, limited[0].id]  # the second one is parked
    assert queue.counts()["waiting"] == 1
    [released] = queue.ack(claimed[2], claim=1)
    assert released.id == limited[1].id
    with cluster.nodes[0].client() as client:
        keys = queue.core.keys
        slots = {client.execute_command("CLUSTER", "KEYSLOT", k)
                 for k in (keys.waiting, keys.levels, keys.level(7), keys.parked)}  # fmt: skip
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


def test_results_are_waited_for_on_a_cluster(cluster: Cluster) -> None:
    """The result reader's XREAD, its probe pipeline and its MGET all stay in the queue's slot."""
    queue = Queue.from_url(cluster.url, "results", store_results=True)
    job = queue.enqueue("t", 20)
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(job.result(20)))
    waiter.start()
    worker = Worker(queue, {"t": lambda job: job.payload + 1}, burst=True,
                    install_signal_handlers=False)  # fmt: skip
    worker.run()
    waiter.join(20)
    assert got == [21]
    assert queue.result(job.id, 0) == 21
    queue.close()


async def test_async_results_are_waited_for_on_a_cluster(cluster: Cluster) -> None:
    queue = AsyncQueue.from_url(cluster.url, "results-a", store_results=True)
    job = await queue.enqueue("t", 1)
    waiting = asyncio.ensure_future(job.result(20))

    async def handle(job: Job) -> int:
        return job.payload * 2

    await AsyncWorker(queue, {"t": handle}, burst=True, install_signal_handlers=False).run()
    assert await asyncio.wait_for(waiting, 20) == 2
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


@contextlib.contextmanager
def _replica_of(cluster: Cluster, name: str):  # type: ignore[no-untyped-def]
    """A client of the replica of the shard serving queue `name`, allowed to read (READONLY)."""
    owner = cluster.owner(key_slot(name.encode()))
    with next(shard[1] for shard in cluster.shards if shard[0] is owner).client() as client:
        client.execute_command("READONLY")
        yield client


def test_wait_replicas_on_a_cluster_waits_on_the_slot_owner(cluster: Cluster) -> None:
    """WAIT follows the write on the owner's connection: the owner's replica holds the job."""
    for name in _names_on_distinct_shards(cluster, 3, "w-q"):
        queue = Queue.from_url(cluster.url, name, wait_replicas=1)
        job = queue.enqueue("t", 1)
        with _replica_of(cluster, queue.name) as replica:
            assert replica.hget(queue.core.keys.job(job.id), "n") == b"t"
        [claimed] = queue.claim()
        queue.ack(claimed)
        assert queue.counts()["total_completed"] == 1
        queue.close()


def test_wait_for_more_replicas_than_a_shard_has_raises_replication_error(cluster: Cluster) -> None:
    too_many_replicas_refused(cluster.url, "w-too-many", 1)


async def test_async_wait_replicas_on_a_cluster(cluster: Cluster) -> None:
    await async_wait_checked(cluster.url, "w-async", lambda: _replica_of(cluster, "w-async"), 1)


def _count_pipelines(queue, monkeypatch: pytest.MonkeyPatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Record, per pipeline sent by the grouped path, how many commands it held."""
    sizes: list[int] = []
    original = queue._pipeline_on

    def counted(node, commands):  # type: ignore[no-untyped-def]
        sizes.append(len(commands))
        return original(node, commands)

    monkeypatch.setattr(queue, "_pipeline_on", counted)
    return sizes


@pytest.mark.parametrize("wait", [0, 1])
def test_enqueue_many_to_sends_one_pipeline_per_shard(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, wait: int
) -> None:
    names = _names_on_distinct_shards(cluster, 3, f"fan{wait}-", per=2)
    queue = Queue.from_url(cluster.url, names[0], wait_replicas=wait)
    queue.enqueue("warm", None)  # connect, check the server and load the script first
    sizes = _count_pipelines(queue, monkeypatch)
    jobs = queue.enqueue_many_to({name: [("t", f"{name}:{i}") for i in range(5)] for name in names})
    assert sizes == [2 + wait] * 3  # one pipeline per shard: two script calls [, WAIT]
    for name in names:
        assert [job.payload for job in jobs[name]] == [f"{name}:{i}" for i in range(5)]
        peer = Queue.from_url(cluster.url, name)
        assert peer.counts()["waiting"] == 5 + (name == names[0])
        if wait:
            with _replica_of(cluster, name) as replica:
                assert replica.exists(peer.core.keys.job(jobs[name][0].id))
        peer.close()
    queue.close()


async def test_async_enqueue_many_to_on_three_shards(cluster: Cluster) -> None:
    names = _names_on_distinct_shards(cluster, 3, "afan-")
    queue = AsyncQueue.from_url(cluster.url, names[0])
    jobs = await queue.enqueue_many_to({name: [("t", i) for i in range(3)] for name in names})
    assert {name: len(v) for name, v in jobs.items()} == dict.fromkeys(names, 3)
    for name in names:
        peer = AsyncQueue.from_url(cluster.url, name)
        assert (await peer.counts())["waiting"] == 3
        await peer.aclose()
    await queue.aclose()


def test_enqueue_many_to_validates_every_batch_before_sending(cluster: Cluster) -> None:
    queue = Queue.from_url(cluster.url, "fan-valid")
    with pytest.raises(InvalidNameError, match="hash tag"):
        queue.enqueue_many_to({"fan-valid": [("t", 1)], "bad{name}": [("t", 1)]})
    with pytest.raises(ValueError, match="batch holds"):  # an empty batch sends nothing instead
        queue.enqueue_many_to({"fan-valid": [("t", 1)], "fan-big": [("t", i) for i in range(1001)]})
    assert queue.counts()["waiting"] == 0
    queue.close()


def test_bad_cluster_urls_name_the_problem() -> None:
    with pytest.raises(InvalidNameError, match="host:port"):
        Queue.from_url("redis+cluster://nohostport", "q")
    with pytest.raises(InvalidNameError, match="scheme"):
        Queue.from_url("redis+clusterx://h:1", "q")


@pytest.mark.parametrize("wait", [0, 1])
def test_queue_works_after_its_slot_moves_to_another_primary(cluster: Cluster, wait: int) -> None:
    """MOVED is followed: migrate the queue's slot (and keys) to another shard mid-use."""
    name = f"migrating-{wait}"
    queue = Queue.from_url(cluster.url, name, wait_replicas=wait)
    queue.enqueue_many([("t", i) for i in range(5)])
    slot, source, target = _slot_and_another_primary(cluster, name)
    _migrate_slot(source, target, slot)
    jobs = queue.claim(5)
    assert len(jobs) == 5
    for job in jobs:
        queue.ack(job)
    queue.enqueue("t", 5)  # with wait_replicas: the grouped path follows MOVED too
    assert queue.counts()["total_completed"] == 5
    assert queue.counts()["waiting"] == 1
    queue.close()


@pytest.mark.parametrize(("mode", "wait"), [("sync", 0), ("sync", 1), ("async", 1)])
def test_an_enqueue_during_a_slot_migration_waits_out_tryagain(
    cluster: Cluster, mode: str, wait: int
) -> None:
    """A reshard in progress has moved some of a queue's keys: a script call naming keys on both
    nodes is refused with TRYAGAIN, which means it did not run. redis-py's cluster client re-sends a
    lone EVALSHA; the pipeline of EVALSHA then WAIT (wait_replicas) raised the TryAgainError at once."""
    name = f"tryagain-{mode}-{wait}"
    queue = Queue.from_url(cluster.url, name, wait_replicas=wait)
    queue.enqueue_many([("t", i) for i in range(5)])
    slot, source, target = _slot_and_another_primary(cluster, name)
    _start_migration(source, target, slot)
    with source.client() as src:  # one of the queue's keys moves first
        src.execute_command("MIGRATE", target.host, target.port, queue.core.keys.meta, 0, 5000)

    def finish() -> None:  # the rest of the reshard, a moment later
        time.sleep(0.15)
        _finish_migration(source, target, slot)

    rest = threading.Thread(target=finish)
    rest.start()
    try:
        if mode == "sync":
            job = queue.enqueue("t", 5)
        else:
            job = asyncio.run(_async_enqueue(cluster.url, name, wait))
    finally:
        rest.join(10)
    assert job.created
    assert queue.counts()["waiting"] == 6
    queue.close()


async def _async_enqueue(url: str, name: str, wait: int) -> Job:
    queue = AsyncQueue.from_url(url, name, wait_replicas=wait)
    try:
        return await queue.enqueue("t", 5)
    finally:
        await queue.aclose()


def _slot_and_another_primary(cluster: Cluster, name: str):  # type: ignore[no-untyped-def]
    """The slot of queue ``name``, the primary serving it, and another running primary."""
    slot = key_slot(name.encode())
    source = cluster.owner(slot)
    return slot, source, next(s[0] for s in cluster.shards if s[0] is not source and s[0].running)


def _node_id(node) -> str:  # type: ignore[no-untyped-def]
    with node.client() as client:
        return client.execute_command("CLUSTER", "MYID").decode()


def _start_migration(source, target, slot: int) -> None:  # type: ignore[no-untyped-def]
    """The documented slot migration's first step: the target IMPORTING, the source MIGRATING."""
    with source.client() as src, target.client() as dst:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", _node_id(source))
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", _node_id(target))


def _finish_migration(source, target, slot: int) -> None:  # type: ignore[no-untyped-def]
    """The rest: MIGRATE the slot's keys left on the source, then SETSLOT NODE on both."""
    target_id = _node_id(target)
    with source.client() as src, target.client() as dst:
        while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        for client in (dst, src):
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


def _migrate_slot(source, target, slot: int) -> None:  # type: ignore[no-untyped-def]
    """The documented slot migration: IMPORTING/MIGRATING, MIGRATE the keys, SETSLOT NODE everywhere."""
    _start_migration(source, target, slot)
    _finish_migration(source, target, slot)


def _same_slot_pair(prefix: str) -> tuple[str, str]:
    """Two queue names whose hash tags map to one slot (a birthday search: ~150 names)."""
    seen: dict[int, str] = {}
    for i in range(20_000):
        name = f"{prefix}{i}"
        slot = key_slot(name.encode())
        if slot in seen:
            return seen[slot], name
        seen[slot] = name
    raise AssertionError("no two names in one slot")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_several_queues_wait_with_one_waiter_per_slot(cluster: Cluster, mode: str) -> None:
    """A BZPOPMIN over several keys must stay in one slot: the runner makes one waiter per slot
    among its queues. Two queues share a slot here, a third has its own: two waiters, and a job on
    any queue is picked up long before the 30 s block would end."""
    names = [*_same_slot_pair(f"slot-{mode}-"), _names_on_distinct_shards(cluster, 1, f"own-{mode}-")[0]]
    app = Conveyor(cluster.url)
    done: list[str] = []
    for name in names:
        if mode == "sync":
            app.task(queue=name, name=f"t-{name}")(lambda n=name: done.append(n))
        else:
            async def run(n: str = name) -> None:
                done.append(n)
            app.task(queue=name, name=f"t-{name}")(run)
    runner = Runner(app, names, block_timeout=30)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()

    def waiters() -> list[str]:
        found = []
        for node in cluster.nodes:
            with node.client() as client:
                found += [c["name"] for c in client.client_list() if c.get("name", "").endswith(":waiter")]
        # (a set: the asyncio cluster client may keep a connection to each node it read the slot
        # map from, all named after its role)
        return sorted({n for n in found if n.split(":")[1] in names})

    deadline = time.monotonic() + 10
    while waiters() != sorted(f"conveyor:{n}:waiter" for n in (names[0], names[2])):
        assert time.monotonic() < deadline, f"waiters: {waiters()}"
        time.sleep(0.05)
    for name in reversed(names):
        app.enqueue(f"t-{name}")
        deadline = time.monotonic() + 10
        while name not in done:
            assert time.monotonic() < deadline, f"the job on {name} was not picked up"
            time.sleep(0.02)
    started = time.monotonic()
    runner.stop()
    thread.join(20)
    assert not thread.is_alive() and time.monotonic() - started < 10
    app.close()


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_socket_timeout_under_a_second_still_serves_result_waiters_on_a_cluster(
    cluster: Cluster, surface: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The reader's XREAD followed a short socket_timeout only on one server (a86ad87): a Cluster
    client has no connection_pool, so there the block stayed 1 s. With socket_timeout=0.3 every
    idle read raised TimeoutError, the reader logged 'lost the server' again and again and never
    did its idle re-read, so a waiter whose job finished without a record waited out its whole
    timeout instead of being told at once."""
    name = f"short-timeout-{surface}"
    cls = Queue if surface == "sync" else AsyncQueue
    queue: Any = cls.from_url(cluster.url, name, store_results=True, socket_timeout=0.3)
    workers = Queue.from_url(cluster.url, name, store_results=False)

    async def call(method: str, *args: Any) -> Any:
        target = getattr(queue, method)
        return await (asyncio.to_thread(target, *args) if surface == "sync" else target(*args))

    try:
        job = await call("enqueue", "t", None)
        waiter = asyncio.ensure_future(call("result", job.id, 8))
        deadline = time.monotonic() + 5
        while not queue._results.registry.waiting:
            assert time.monotonic() < deadline, "the waiter did not register"
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.0)  # idle reads
        [claimed] = workers.claim()
        workers.ack(claimed, result="not stored")
        started = time.monotonic()
        with pytest.raises(ConveyorError, match="has no stored result"):
            await asyncio.wait_for(waiter, 10)
        assert time.monotonic() - started < 3
        assert "lost the server" not in caplog.text
    finally:
        workers.close()
        await (asyncio.to_thread(queue.close) if surface == "sync" else queue.aclose())
