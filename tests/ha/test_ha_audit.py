"""Audit of high availability: failovers with jobs in flight, and bad Sentinel input."""

from __future__ import annotations

import pytest
from conveyor import AsyncQueue, ConnectionFailedError

from bench.topologies import SentinelGroup


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
