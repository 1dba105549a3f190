"""Regression tests of the lease and shutdown defects of issue 7 (numbers refer to its list).

Each test failed on the code before its fix; most run on both surfaces (Worker and AsyncWorker).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import Backoff


def _gate(api):
    """An event the test opens and a handler blocks on (threading.Event works for both surfaces:
    the async handler polls it, so the event loop never blocks)."""
    gate = threading.Event()

    if api.is_async:

        async def wait(job):
            while not gate.is_set():
                await asyncio.sleep(0.01)

        return gate, wait

    return gate, lambda job: gate.wait(30)


async def test_heartbeats_continue_during_graceful_shutdown(api):
    """1: a job still running after stop() keeps its lease (heartbeats go on) and is acked once."""
    q = api.queue(lease=0.6, maintenance_interval=0.1)
    gate, block = _gate(api)
    runs: list[int] = []
    handler = api.handler(block) if not api.is_async else block
    w = api.worker(q, {"t": _recording(handler, runs)}, shutdown_timeout=20)
    await q.enqueue("t")
    await wait_until(lambda: runs == [1], timeout=10, what="the handler to start")
    w.worker.stop()
    await asyncio.sleep(1.5)  # more than two leases after stop()
    assert await q.recover() == (0, 0), "the lease expired during the graceful shutdown"
    gate.set()
    stats = await w.join(10)
    assert runs == [1]
    assert stats["processed"] == 1
    assert await q.counts() == counts(total_completed=1)


def _recording(handler, runs):
    """Wrap a handler of either surface so it records the attempt number before running."""
    if asyncio.iscoroutinefunction(handler):

        async def async_wrapped(job):
            runs.append(job.attempts)
            await handler(job)

        return async_wrapped

    def wrapped(job):
        runs.append(job.attempts)
        handler(job)

    return wrapped


async def test_late_ack_fail_and_extend_are_accepted_while_the_token_still_matches(api):
    """2: past the deadline but before recovery, the token still proves nobody else holds the job."""
    q = api.queue(lease=0.1, keep_completed=-1, keep_failed=-1)
    await q.enqueue_many([("t", i) for i in range(3)])
    extended, failed, acked = await q.claim(count=3)
    await asyncio.sleep(0.3)
    await q.extend(extended, lease=30)
    assert await q.fail(failed, "late error text", retry=False) == "failed"
    await q.ack(acked)
    assert await q.counts() == counts(active=1, completed=1, failed=1, total_completed=1,
                                      total_failed=1)
    assert (await q.get_job(failed.id)).error == "late error text"
    assert await q.recover() == (0, 0)  # the extended lease is alive again


async def test_stop_deadline_holds_while_the_server_is_unreachable(api):
    """3: stop() with a finished job whose ack cannot be sent returns at its deadline."""
    q = api.queue(lease=5.0, socket_timeout=1.0, connect_timeout=1.0)
    started = threading.Event()
    w = api.worker(q, {"t": api.handler(start=lambda j: started.set(), sleep=0.5)},
                   shutdown_timeout=1.0)
    await q.enqueue("t")
    await wait_until(started.is_set, timeout=10, what="the handler to start")
    await asyncio.to_thread(api.server.stop)
    try:
        t0 = time.monotonic()
        w.worker.stop()
        await w.join(8)  # 1 s deadline, plus at most a connect timeout or two
        assert time.monotonic() - t0 < 6
    finally:
        await asyncio.to_thread(api.server.start)


async def test_backoff_overflow_does_not_crash_the_worker(api):
    """8: a job deep into a huge max_attempts fails into a retry; the worker lives on."""
    q = api.queue(backoff=Backoff(base=0.01, cap=0.05), maintenance_interval=0.1)
    job = await q.enqueue("boom", None, max_attempts=100_000)
    api.admin.hset(q.keys.jobs + job.id, "a", 5000)

    def boom(job):
        raise RuntimeError("always")

    w = api.worker(q, {"boom": api.handler(boom), "ok": api.handler()})
    await wait_until(lambda: _attempts_above(api, q, job.id, 5002), timeout=10,
                     what="two more failed attempts")
    w.check_alive()
    ok = await q.enqueue("ok")
    await wait_until(lambda: api.admin.exists(q.keys.jobs + ok.id) == 0, timeout=10,
                     what="another job to be processed")
    w.check_alive()


def _attempts_above(api, q, job_id: str, n: int) -> bool:
    return int(api.admin.hget(q.keys.jobs + job_id, "a") or 0) >= n


def test_backoff_exponent_is_capped():
    """8: the delay of any attempt number is computed without overflow and never exceeds the cap."""
    for factor in (1.5, 2.0, 10.0):
        policy = Backoff(base=1.0, factor=factor, cap=300.0, jitter=0.0)
        assert policy.delay(10**9) == 300.0
        assert policy.delay(1025) == 300.0
        assert policy.delay(1) == 1.0


async def test_redelivery_to_the_same_worker_keeps_both_leases(api):
    """9: attempt 2 of a job runs beside the still-running attempt 1 on the same worker; when
    attempt 1 ends (its ack refused), attempt 2 must keep its heartbeat and finish as attempt 2."""
    q = api.queue(lease=0.6, maintenance_interval=0.1, max_attempts=5)
    gate, block = _gate(api)
    runs: list[int] = []
    second_done = threading.Event()

    def second(job):
        time.sleep(2.0) if not api.is_async else None
        second_done.set()

    async def async_second(job):
        await asyncio.sleep(2.0)
        second_done.set()

    first = block if api.is_async else api.handler(block)

    if api.is_async:

        async def handler(job):
            runs.append(job.attempts)
            await (first(job) if job.attempts == 1 else async_second(job))

    else:

        def handler(job):
            runs.append(job.attempts)
            first(job) if job.attempts == 1 else second(job)

    w = api.worker(q, {"t": handler}, concurrency=2)
    job = await q.enqueue("t")
    await wait_until(lambda: runs == [1], timeout=10, what="attempt 1 to start")
    # Make attempt 1's lease look expired and recover it: the same worker claims attempt 2.
    api.admin.zadd(q.keys.active, {job.id: 0})
    assert await q.recover() == (1, 0)
    await wait_until(lambda: runs == [1, 2], timeout=10, what="attempt 2 to start")
    gate.set()  # attempt 1 ends; its ack is refused
    await wait_until(second_done.is_set, timeout=10, what="attempt 2 to end")
    await wait_until(lambda: _gone(api, q, job.id), timeout=10, what="attempt 2 acked")
    w.check_alive()
    assert runs == [1, 2], "attempt 2 lost its heartbeat and the job ran a third time"


def _gone(api, q, job_id: str) -> bool:
    return api.admin.exists(q.keys.jobs + job_id) == 0


async def test_get_job_does_not_expose_the_lease_token(api):
    """10: only the lease holder gets the token; get_job cannot be used to ack another's job."""
    q = api.queue()
    await q.enqueue("t")
    [held] = await q.claim()
    stored = await q.get_job(held.id)
    assert stored.state == "active"
    assert stored.token is None
    assert held.token is not None


@pytest.mark.parametrize("api", ["sync"], indirect=True)
async def test_sync_worker_keeps_the_lease_of_a_handler_still_running_at_the_deadline(api):
    """7: after the deadline, a handler thread that still runs is not released to another worker:
    its lease is left to expire (heartbeats stopped with run())."""
    q = api.queue(lease=5.0)
    gate, block = _gate(api)
    started = threading.Event()

    def handler(job):
        started.set()
        block(job)

    w = api.worker(q, {"t": handler}, shutdown_timeout=0.3)
    job = await q.enqueue("t")
    await wait_until(started.is_set, timeout=10, what="the handler to start")
    w.worker.stop()
    await w.join(5)
    try:
        assert (await q.get_job(job.id)).state == "active"
        assert await q.claim() == []
    finally:
        gate.set()
