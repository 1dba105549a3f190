"""Audit of high availability: failovers with jobs in flight, and bad Sentinel input."""

from __future__ import annotations

from typing import Any

import pytest
from conveyor import AsyncQueue, ConnectionFailedError, Queue
from redis.cluster import key_slot

from bench.topologies import Cluster, SentinelGroup


async def test_async_queue_without_reachable_sentinels_says_so_briefly() -> None:
    """redis.asyncio's MasterNotFoundError is its own class: the async twin's error was 'cannot
    reach the server ...' quoting redis-py's message whole, the repr of every Sentinel's client,
    pool and connection (2,400 characters for two Sentinels), where the sync twin names the
    service, then each Sentinel with its reason."""
    url = "redis+sentinel://user:s3cret@127.0.0.1:1,127.0.0.1:2/svc"
    queue = AsyncQueue.from_url(url, "q", connect_timeout=0.5)
    with pytest.raises(ConnectionFailedError) as info:
        await queue.enqueue("t", 1)
    message = str(info.value)
    assert message.startswith("no primary for Sentinel service 'svc'"), message
    assert "127.0.0.1:1" in message and "127.0.0.1:2" in message, message
    assert "<redis." not in message and "s3cret" not in message and len(message) < 400, message
    await queue.aclose()


async def test_async_queue_with_an_unknown_service_says_no_sentinel_knows_it(
    sentinels: SentinelGroup,
) -> None:
    hosts = ",".join(f"{h}:{p}" for h, p in sentinels.sentinel_addresses)
    queue = AsyncQueue.from_url(f"redis+sentinel://{hosts}/no-such-service", "q")
    with pytest.raises(ConnectionFailedError) as info:
        await queue.enqueue("t", 1)
    message = str(info.value)
    assert message.startswith("no primary for Sentinel service 'no-such-service'"), message
    assert "no Sentinel reports a primary" in message, message
    await queue.aclose()


def _migrating(cluster: Cluster, name: str) -> tuple[Any, Any, int]:
    """Put queue ``name``'s slot in the MIGRATING/IMPORTING state of a reshard (no key moved)."""
    slot = key_slot(name.encode())
    source = cluster.owner(slot)
    target = next(s[0] for s in cluster.shards if s[0] is not source and s[0].running)
    ids = {}
    for node in (source, target):
        with node.client() as client:
            ids[node.port] = client.execute_command("CLUSTER", "MYID").decode()
    with source.client() as src, target.client() as dst:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source.port])
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target.port])
    return source, target, slot


def _stable(source: Any, target: Any, slot: int) -> None:
    """End the reshard without moving anything: the slot stays with its owner."""
    for node in (source, target):
        with node.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_call_refused_for_a_migrating_slot_says_it_did_not_run(
    cluster: Cluster, surface: str
) -> None:
    """While a queue's slot is being resharded (MIGRATING), every script call of the queue is
    refused with TRYAGAIN (its key prefixes, never real keys, count as missing keys). Without
    wait_replicas a lone call goes through redis-py's cluster client, which gives up after about
    0.4 s: the error read 'Redis Cluster via ...: TTL exhausted.', which says neither why nor that
    the enqueue did not run (a caller without a job_id cannot tell whether to send it again)."""
    name = f"audit-migrating-{surface}"
    queue: Any = (Queue if surface == "sync" else AsyncQueue).from_url(cluster.url, name)

    async def enqueue() -> Any:
        return queue.enqueue("t", 1) if surface == "sync" else await queue.enqueue("t", 1)

    await enqueue()
    source, target, slot = _migrating(cluster, name)
    try:
        with pytest.raises(ConnectionFailedError) as info:
            await enqueue()
    finally:
        _stable(source, target, slot)
    message = str(info.value)
    assert "TRYAGAIN" in message and "did not run" in message, message
    assert (await enqueue()).created
    counts = queue.counts() if surface == "sync" else await queue.counts()
    assert counts["waiting"] == 2
    queue.close() if surface == "sync" else await queue.aclose()
