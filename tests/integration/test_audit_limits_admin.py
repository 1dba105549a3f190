"""Audit of per-key limits meeting the admin and recovery paths (cancel, release, retry, purge,
recovery, trim): each test failed before its fix, or pins a documented behaviour."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import Job, JobSpec, Limit


def _due_in(api, q, job_id: str) -> float:
    """Ms until the delayed job ``job_id`` is due."""
    return api.admin.zscore(q.keys.delayed, job_id) - api.server_ms()


async def test_cancelling_a_rate_held_job_after_its_start_came_gives_the_start_back(api):
    """A job over its key's rate waits in the delayed set for the start it reserved; once that
    start comes, a promotion (any claim, or a maintenance tick) moves it to the waiting list, where
    it still holds the reservation until a worker claims it. Cancelled there, it kept the key's
    next start an interval ahead: the key's next job waited that interval for a start nobody
    took (rate 0.5/s: 2 s), where the same cancel a moment before the promotion gave it back."""
    q = api.queue()
    limit = Limit("rated", rate=0.5)  # starts 2 s apart
    first, second = (j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(2)]))
    [running] = await q.claim(count=2)
    assert running.id == first
    await asyncio.sleep(_due_in(api, q, second) / 1000 + 0.05)
    assert await q.promote() == 1  # its start came: waiting, its reservation still held
    assert (await q.get_job(second)).state == "waiting"
    assert await q.cancel(second)
    third = (await q.enqueue("t", 3, limit=limit)).id
    [started] = await q.claim()  # the start the cancelled job held, given back (it passed: now)
    assert started.id == third
    assert await q.counts() == counts(active=2)


def _holding_on(api, seen: list[str], done: threading.Event):
    """A handler that records its start and runs on until ``done``, though its job is cancelled:
    a thread cannot be interrupted, and the async one catches its CancelledError."""
    if api.is_async:

        async def async_holding(job: Job) -> None:
            seen.append(f"start {job.payload}")
            while not done.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0.01)
            seen.append(f"end {job.payload}")

        return async_holding

    def sync_holding(job: Job) -> None:
        seen.append(f"start {job.payload}")
        done.wait(10)
        seen.append(f"end {job.payload}")

    return sync_holding


async def test_a_job_cancelled_while_its_handler_runs_on_holds_its_keys_slot_until_it_returns(api):
    """A running job's cancel settles it (cancelled) at once for a thread, and a third of a lease
    later for an async handler that catches its CancelledError. Its handler may still be running:
    its limit key's slot stays held until it returns (production.md, Limits), so the key's next
    job starts after it, not beside it (as it did before the hold)."""
    q = api.queue(lease=0.6, maintenance_interval=0.1)
    seen: list[str] = []
    done = threading.Event()
    w = api.worker(q, {"t": _holding_on(api, seen, done)}, concurrency=2)
    try:
        limit = Limit("one", concurrency=1)
        first = await q.enqueue("t", 1, limit=limit)
        await wait_until(lambda: seen == ["start 1"], timeout=10, what="the first job to start")
        await q.enqueue("t", 2, limit=limit)
        await asyncio.sleep(0.3)
        assert seen == ["start 1"]  # parked behind the first
        assert await q.cancel(first.id)

        async def cancelled() -> bool:
            return (await q.get_job(first.id)).state == "cancelled"

        await wait_until(cancelled, timeout=10, what="the cancelled job to be settled")
        await asyncio.sleep(0.5)  # a few maintenance ticks
        assert seen == ["start 1"]  # settled, its handler still runs: the next job stays parked
    finally:
        done.set()
    await wait_until(lambda: "start 2" in seen, timeout=10, what="the next job of the key to start")
    assert seen[:3] == ["start 1", "end 1", "start 2"]  # (the second ends at once: done is set)
    w.stop()
    await w.join(10)
    assert await q.counts() == counts(total_completed=1, cancelled=1)


async def test_a_rate_limited_job_given_back_unstarted_reserves_the_keys_next_start(api):
    """A claim takes the key's start (the worker is to start the job at once): a job given back
    before its handler took it (a shutdown, or a prefetched job past its time limit) gets its
    attempt back but not that start, and claimed again waits for the key's next one."""
    q = api.queue()
    limit = Limit("rated", rate=0.5)  # starts 2 s apart
    job = await q.enqueue("t", 1, limit=limit)
    [held] = await q.claim()
    assert await q.release([held], started=False) == [1]
    assert await q.claim() == []
    assert 1500 < _due_in(api, q, job.id) <= 2000
    assert (await q.get_job(job.id)).attempts == 0


async def test_a_key_with_both_limits_starts_its_jobs_in_the_order_they_came(api):
    """With Limit(concurrency=1, rate=...), a job claimed while the key's slot was free but
    another job of the key waited for the start it had reserved reserved the start after it;
    when that start came, the first job was running, and it was parked behind the jobs parked
    since (claimed after it, once the first had started): they started before it. A job
    reserving a start now holds the key's slot, so the one claimed meanwhile parks in order."""
    q = api.queue()
    limit = Limit("ordered", concurrency=1, rate=2)  # one at a time, starts 0.5 s apart
    await q.enqueue_many([JobSpec("t", 1, limit=limit)])
    [held] = await q.claim()
    await q.ack(held)  # the key is idle, its next start 0.5 s ahead
    second, third = await q.enqueue_many([JobSpec("t", i, limit=limit) for i in (2, 3)])
    assert await q.claim(count=2) == []  # the second reserves that start, the third waits behind
    await asyncio.sleep(_due_in(api, q, second.id) / 1000 + 0.05)
    [running] = await q.claim()
    assert running.id == second.id  # and runs long
    await q.enqueue("t", 4, limit=limit)
    assert await q.claim() == []  # parked: the key's slot is taken
    await asyncio.sleep(0.55)  # past the start the third would have reserved
    assert await q.claim() == []
    started = [j.id for j in await q.ack(running, claim=1)]
    if not started:  # (the released job waits for the key's next start, if it has not come)
        await asyncio.sleep(0.55)
        started = [j.id for j in await q.claim()]
    assert started == [third.id]
    assert await q.counts() == counts(waiting=1, active=1, total_completed=2)  # the fourth, next


async def test_cancelling_a_job_holding_a_reserved_start_hands_its_slot_and_start_on(api):
    """With both limits, a job waiting for the start it reserved holds its key's slot; cancelled,
    delayed or already promoted to the waiting list, it hands the slot to the job parked behind
    it and gives its start back, so that job starts at that start (at once, once it passed)."""
    q = api.queue()
    limit = Limit("handed-on", concurrency=1, rate=2)  # one at a time, starts 0.5 s apart
    for promoted in (False, True):
        await q.enqueue_many([JobSpec("t", 1, limit=limit)])
        [held] = await q.claim()
        await q.ack(held)  # the key is idle, its next start 0.5 s ahead
        reserving, parked = await q.enqueue_many([JobSpec("t", i, limit=limit) for i in (2, 3)])
        assert await q.claim(count=2) == []
        assert await q.counts() == counts(waiting=1, delayed=1, total_completed=2 * promoted + 1)
        due = _due_in(api, q, reserving.id)
        if promoted:
            await asyncio.sleep(due / 1000 + 0.05)
            assert await q.promote() == 1
        assert await q.cancel(reserving.id)
        if not promoted:
            assert await q.claim() == []  # released, it waits for the start given back
            assert abs(_due_in(api, q, parked.id) - due) < 100
            await asyncio.sleep(due / 1000 + 0.05)
        [started] = await q.claim()
        assert started.id == parked.id
        await q.ack(started)
        await asyncio.sleep(0.55)  # the key's next start passes
