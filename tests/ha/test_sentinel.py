"""Conveyor behind real Sentinels: URL or client, role connections via master_for, bad input."""

from __future__ import annotations

import pytest
from _ha import async_wait_checked, too_many_replicas_refused
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    InvalidNameError,
    Job,
    Queue,
    Worker,
)
from redis.sentinel import Sentinel

from bench.topologies import SentinelGroup


def test_sync_worker_behind_sentinels(sentinels: SentinelGroup) -> None:
    queue = Queue.from_url(sentinels.url, "s-sync")
    queue.enqueue_many([("t", i) for i in range(30)])
    seen: list[int] = []
    worker = Worker(queue, {"t": lambda job: seen.append(job.payload)}, burst=True,
                    install_signal_handlers=False)  # fmt: skip
    assert worker.run()["processed"] == 30
    assert sorted(seen) == list(range(30))
    queue.close()


async def test_async_worker_behind_sentinels(sentinels: SentinelGroup) -> None:
    queue = AsyncQueue.from_url(sentinels.url, "s-async")
    await queue.enqueue_many([("t", i) for i in range(30)])
    seen: list[int] = []

    async def handle(job: Job) -> None:
        seen.append(job.payload)

    worker = AsyncWorker(queue, {"t": handle}, burst=True, install_signal_handlers=False)
    assert (await worker.run())["processed"] == 30
    assert sorted(seen) == list(range(30))
    await queue.aclose()


def test_a_master_for_client_can_be_passed_directly(sentinels: SentinelGroup) -> None:
    """The role connections are built with master_for too (no KeyError on 'connection_pool')."""
    client = Sentinel(sentinels.sentinel_addresses).master_for(sentinels.service)
    queue = Queue("s-direct", client)
    queue.enqueue_many([("t", i) for i in range(5)])
    worker = Worker(queue, {"t": lambda job: None}, burst=True, install_signal_handlers=False)
    assert worker.run()["processed"] == 5
    client.close()


def test_writes_reach_the_primary_and_replicas(sentinels: SentinelGroup) -> None:
    queue = Queue.from_url(sentinels.url, "s-replicated", wait_replicas=2)
    job = queue.enqueue("t", 1)
    for server in sentinels.servers:
        with server.client() as client:
            assert client.hget(queue.core.keys.job(job.id), "n") == b"t"
    queue.close()


def test_waiting_for_more_replicas_than_exist_raises_replication_error(sentinels: SentinelGroup) -> None:
    too_many_replicas_refused(sentinels.url, "s-too-many", 2)


async def test_async_queue_waits_for_replicas_too(sentinels: SentinelGroup) -> None:
    await async_wait_checked(sentinels.url, "s-async-wait", sentinels.servers[-1].client, 2)


def test_unknown_service_name_is_named_in_the_error(sentinels: SentinelGroup) -> None:
    hosts = ",".join(f"{h}:{p}" for h, p in sentinels.sentinel_addresses)
    queue = Queue.from_url(f"redis+sentinel://{hosts}/no-such-service", "q")
    with pytest.raises(ConnectionFailedError, match="no-such-service"):
        queue.enqueue("t", 1)


def test_no_reachable_sentinel_names_the_service_and_the_sentinels() -> None:
    queue = Queue.from_url("redis+sentinel://127.0.0.1:1,127.0.0.1:2/svc", "q", connect_timeout=0.5)
    with pytest.raises(ConnectionFailedError, match=r"'svc'.*127\.0\.0\.1:1"):
        queue.enqueue("t", 1)


def test_sentinel_url_needs_a_service_name() -> None:
    with pytest.raises(InvalidNameError, match="service name"):
        Queue.from_url("redis+sentinel://127.0.0.1:26379", "q")


def test_credentials_never_appear_in_sentinel_errors() -> None:
    url = "redis+sentinel://user:s3cret@127.0.0.1:1/svc"
    queue = Queue.from_url(url, "q", connect_timeout=0.5)
    with pytest.raises(ConnectionFailedError) as info:
        queue.enqueue("t", 1)
    assert "s3cret" not in str(info.value)
