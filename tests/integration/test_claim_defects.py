"""Regression tests of issue 7's defects 4 (timeouts), 5 (large batches) and 6 (free-slot wake-up)."""

from __future__ import annotations

import asyncio
import random
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
from conveyor import AsyncQueue, JobSpec, Queue


def _busy_server(api, ms: int) -> threading.Thread:
    """Stall the server for ``ms`` (DEBUG SLEEP: it reads nothing meanwhile, then serves what
    arrived, even from clients that gave up and closed their socket)."""
    admin = api.server.client(socket_timeout=30)
    sleep = lambda: (admin.execute_command("DEBUG", "SLEEP", ms / 1000), admin.close())  # noqa: E731
    thread = threading.Thread(target=sleep, daemon=True)
    thread.start()
    time.sleep(0.1)  # the script is running
    return thread


async def test_timed_out_enqueue_on_a_callers_client_is_not_sent_twice(api):
    """4: Queue(name, redis.Redis(...)) must not re-send a timed-out script call (redis-py 8
    retries by default): a timed-out enqueue_many of 10 jobs stored 20 and reported success."""
    srv = api.server
    if api.is_async:
        q = AsyncQueue(api.name, aredis.Redis(host=srv.host, port=srv.port, socket_timeout=0.3))
    else:
        q = Queue(api.name, redis.Redis(host=srv.host, port=srv.port, socket_timeout=0.3))
    try:
        await _maybe(q.counts())  # start-up checks done before the stall
        busy = _busy_server(api, 1500)
        with pytest.raises(Exception, match=r"(?i)timeout|timed out"):
            await _maybe_thread(q.enqueue_many, [("t", i) for i in range(10)])
        await asyncio.to_thread(busy.join, 10)
        # The server may or may not have run the one call it received; never twice.
        await asyncio.sleep(0.5)
        assert api.admin.llen(q.core.keys.waiting) in (0, 10)
    finally:
        await _maybe(q.aclose()) if api.is_async else q.close()


async def _maybe(value):
    return await value if asyncio.iscoroutine(value) else value


async def _maybe_thread(fn, *args):
    result = fn(*args) if asyncio.iscoroutinefunction(fn) else asyncio.to_thread(fn, *args)
    return await result


async def test_claim_replay_returns_the_same_batch(api):
    """4: a re-sent ack+claim with the same request id returns the batch the lost reply held."""
    q = api.queue()
    await q.enqueue_many([("t", i) for i in range(5)])
    core = q.inner.core
    first = await q._run(core.ack([], 3, request=("w-1", 7)))
    again = await q._run(core.ack([], 3, request=("w-1", 7), resend=True))
    assert [(j.id, j.token) for j in first[1]] == [(j.id, j.token) for j in again[1]]
    assert len(first[1]) == 3
    assert await q.counts() == counts(waiting=2, active=3)
    nxt = await q._run(core.ack(first[1][:1], 3, request=("w-1", 8)))
    assert nxt[0] == [1]
    assert len(nxt[1]) == 2
    assert {j.id for j in nxt[1]}.isdisjoint(j.id for j in first[1])
    replayed = await q._run(core.ack(first[1][:1], 3, request=("w-1", 8), resend=True))
    assert replayed[0] == [1]  # the ack's own status is replayed too
    assert [j.token for j in replayed[1]] == [j.token for j in nxt[1]]


async def test_claimed_jobs_keep_every_field_through_claim_ack_and_replay(api):
    """A claimed job comes back packed in one header string per job (claimed_entry in _lib.lua):
    a payload holding the separator ('{'), the task name, the attempt count, max attempts,
    the enqueue time and a time limit must all come out as they went in, from a claim, from an
    ack's claim and from a re-sent ack's replay."""
    q = api.queue()
    before = time.time()
    specs = [JobSpec("a.b:c-d", {"x": "{y}"}, max_attempts=4, time_limit=2.5),
             JobSpec("plain", [1], max_attempts=2), JobSpec("t", "{", max_attempts=3)]
    await q.enqueue_many(specs)
    core = q.inner.core

    def fields(jobs):
        return [(j.task, j.payload, j.attempts, j.max_attempts, j.time_limit) for j in jobs]

    claimed, _ = await q._run(core.claim(1, None))
    assert fields(claimed) == [("a.b:c-d", {"x": "{y}"}, 1, 4, 2.5)]
    assert before - 1 <= claimed[0].enqueued_at <= time.time() + 1
    _, acked, _ = await q._run(core.ack(claimed, 2, request=("w-1", 1)))
    _, replayed, _ = await q._run(core.ack(claimed, 2, request=("w-1", 1), resend=True))
    want = [("plain", [1], 1, 2, None), ("t", "{", 1, 3, None)]
    assert fields(acked) == want
    assert fields(replayed) == want
    assert [(j.id, j.token, j.enqueued_at) for j in replayed] == [
        (j.id, j.token, j.enqueued_at) for j in acked]


async def test_worker_rides_out_a_stall_longer_than_its_socket_timeout(api):
    """4: the pump's ack+claim times out while the server is stalled, but the server runs it once
    the stall ends; the re-sent call must get that batch instead of leaving it orphaned (the job
    then failed "lease expired after attempt 1 of 1" without ever running). The lease (3 s) is
    what the re-sent call has after the stall to get its answer: under CI load glide's client
    took over 1 s to recover from the timeout, and the job then rightly failed by lease expiry."""
    q = api.queue(lease=3.0, max_attempts=1, socket_timeout=0.4, maintenance_interval=0.1,
                  keep_failed=-1)
    ran: list[int] = []
    first_started = threading.Event()

    def work(job):
        ran.append(job.payload)
        if job.payload == 0:
            first_started.set()
            time.sleep(0.5)

    w = api.worker(q, {"t": api.handler(work)}, concurrency=1)
    await q.enqueue_many([("t", 0), ("t", 1)])
    await wait_until(first_started.is_set, timeout=10, what="job 0 to start")
    busy = _busy_server(api, 1500)  # job 0 ends during the stall: its ack+claim times out
    await asyncio.to_thread(busy.join, 10)
    await wait_until(lambda: _settled(api, q, 2), timeout=15, what="both jobs settled")
    w.check_alive()
    assert sorted(ran) == [0, 1]
    assert await q.counts() == counts(total_completed=2)


def _settled(api, q, n: int) -> bool:
    done, failed = api.admin.hmget(q.keys.meta, ["completed", "failed"])
    return int(done or 0) + int(failed or 0) >= n


def test_largest_maintenance_batch_promotes_and_trims(server, queue_name):
    """5: promote and trim-by-age at maintenance_batch=100000 (Lua's unpack limit is ~8000)."""
    q = Queue.from_url(server.url, queue_name, maintenance_batch=100_000, keep_completed=-1,
                       completed_max_age=0.05)
    admin = server.client()
    try:
        n = 9000
        for start in range(0, n, 1000):
            q.enqueue_many([_delayed(i) for i in range(start, start + 1000)])
        time.sleep(0.1)
        assert q.promote() == n
        assert q.counts()["waiting"] == n
        for _ in range(n // 1000):
            q._run(q.core.ack(q.claim(1000)))
        assert q.counts()["completed"] == n
        time.sleep(0.1)
        assert q.trim() == n
        assert q.counts() == {**counts(total_completed=n)}
        assert sorted(admin.scan_iter(match=f"cv:{{{queue_name}}}:j:*", count=1000)) == []
    finally:
        q.close()
        admin.close()


def _delayed(i: int):
    return JobSpec("t", i, delay=0.01)


async def test_a_partly_busy_worker_picks_up_new_jobs_at_once(api):
    """6: with one slot blocked and one free, a new job starts without a 0.5 s poll."""
    q = api.queue()
    gate = threading.Event()
    starts: dict[int, float] = {}

    def work(job):
        starts[job.payload] = time.monotonic()
        if job.payload == -1:
            gate.wait(30)

    if api.is_async:

        async def handler(job):
            starts[job.payload] = time.monotonic()
            while job.payload == -1 and not gate.is_set():
                await asyncio.sleep(0.01)

    else:
        handler = work
    w = api.worker(q, {"t": handler}, concurrency=2)
    try:
        await q.enqueue("t", -1)
        await wait_until(lambda: -1 in starts, timeout=10, what="the blocking job")
        rng = random.Random(6)
        delays = []
        for i in range(8):
            await asyncio.sleep(rng.uniform(0.1, 0.3))
            t0 = time.monotonic()
            await q.enqueue("t", i)
            await wait_until(lambda i=i: i in starts, timeout=5, what=f"job {i}")
            delays.append(starts[i] - t0)
        w.check_alive()
        assert sum(delays) / len(delays) < 0.12, f"pickup delays {delays}"
    finally:
        gate.set()
