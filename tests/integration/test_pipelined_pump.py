"""The AsyncWorker's pump keeps two ack+claim calls in flight on its one connection (_direct.py)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio as aredis
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor._direct import AsyncPipelinedScripts

ECHO = "return ARGV[1]"


def _stall(server, seconds: float) -> threading.Thread:
    """DEBUG SLEEP from another connection: the server reads nothing meanwhile."""
    admin = server.client(socket_timeout=30)
    thread = threading.Thread(target=lambda: (admin.execute_command("DEBUG", "SLEEP", seconds),
                                              admin.close()), daemon=True)
    thread.start()
    time.sleep(0.1)
    return thread


def _one_connection(url: str, **options) -> aredis.Redis:
    return aredis.Redis.from_pool(aredis.BlockingConnectionPool.from_url(url, max_connections=1, **options))


def _log_io(pool, log: list[str]) -> None:
    """Record each write and each completed read on the pool's connections."""
    base = pool.connection_class

    class Logged(base):
        async def send_packed_command(self, *args, **kwargs):
            log.append("send")
            return await super().send_packed_command(*args, **kwargs)

        async def read_response(self, *args, **kwargs):
            reply = await super().read_response(*args, **kwargs)
            log.append("read")
            return reply

    pool.connection_class = Logged


async def test_calls_overlap_on_one_connection_and_each_reads_its_own_reply(server):
    client = _one_connection(server.url)
    log: list[str] = []
    _log_io(client.connection_pool, log)  # before its first connection
    sha = await client.script_load(ECHO)
    log.clear()
    scripts = AsyncPipelinedScripts(client.connection_pool)
    stall = _stall(server, 0.3)  # no reply can come before every call is sent
    replies = await asyncio.gather(*(scripts.evalsha(sha, [], [str(i)]) for i in range(5)))
    await asyncio.to_thread(stall.join, 10)
    assert replies == [str(i).encode() for i in range(5)]
    assert log == ["send"] * 5 + ["read"] * 5, f"a call waited for an earlier reply: {log}"
    assert await client.client_list() and await client.ping()  # the connection is back in the pool
    await client.aclose()


async def test_a_lost_reply_fails_the_calls_behind_it_and_nothing_reads_a_stale_reply(server):
    client = _one_connection(server.url, socket_timeout=0.3)
    sha = await client.script_load(ECHO)
    scripts = AsyncPipelinedScripts(client.connection_pool)
    stall = _stall(server, 1.0)
    first, second = await asyncio.gather(scripts.evalsha(sha, [], ["a"]), scripts.evalsha(sha, [], ["b"]),
                                         return_exceptions=True)
    assert isinstance(first, redis.TimeoutError), first
    assert isinstance(second, redis.ConnectionError) and "reply lost" in str(second), second
    await asyncio.to_thread(stall.join, 10)
    assert await scripts.evalsha(sha, [], ["c"]) == b"c"  # a fresh connection, not a's late reply
    with pytest.raises(redis.ResponseError, match=r"(?i)no matching script|NOSCRIPT"):
        await scripts.evalsha("0" * 40, [], [])
    assert await scripts.evalsha(sha, [], ["d"]) == b"d"  # an error reply keeps the connection
    await client.aclose()


async def test_a_stall_with_both_calls_in_flight_loses_and_repeats_no_job(api):
    """Both lanes' replies are lost to a socket timeout; each lane re-sends its call with its own
    request id and gets the batch the server claimed for it (with max_attempts=1, an orphaned
    claim would fail "lease expired" without ever running). The lease outlasts the stall, so no
    lease of a job that did run expires meanwhile."""
    q = api.queue(lease=4.0, max_attempts=1, socket_timeout=0.4, maintenance_interval=0.1,
                  keep_failed=-1)
    ran: list[int] = []
    stalled = threading.Event()

    def work(job):
        ran.append(job.payload)
        if not stalled.is_set():
            stalled.set()
            _stall(api.server, 1.5)

    w = api.worker(q, {"t": api.handler(work)}, concurrency=8)
    await q.enqueue_many([("t", i) for i in range(400)])
    await wait_until(lambda: len(ran) >= 400, timeout=20, what="every job run")
    w.check_alive()
    await wait_until(lambda: api.admin.hget(q.keys.meta, "completed") == b"400", timeout=10,
                     what="400 completed")
    assert sorted(ran) == list(range(400))
    assert await q.counts() == counts(total_completed=400)
