"""Leases: a wrong or expired token is refused and changes nothing; expiry redelivers; one ack wins."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
    with_token,
)
from conveyor import LeaseLostError


async def _refused_everywhere(api, q, job):
    """ack, ack+claim, fail (retry and final), extend and release with `job` all refuse; nothing changes."""
    snap, before = api.snapshot(), await q.counts()
    for attempt in (
        lambda: q.ack(job),
        lambda: q.fail(job, "should not be recorded"),
        lambda: q.fail(job, "should not be recorded", retry=False),
        lambda: q.extend(job, lease=60),
    ):
        with pytest.raises(LeaseLostError, match=repr(job.id)):
            await attempt()
        assert api.snapshot() == snap
    assert await q.release([job]) != [1]
    assert api.snapshot() == snap
    assert await q.counts() == before


async def test_wrong_token_is_refused_and_changes_nothing(api):
    q = api.queue(keep_completed=-1)
    await q.enqueue_many([("t", 1), ("t", 2)])
    [leased] = await q.claim()
    for token in ("999999", "", leased.token + "0"):
        await _refused_everywhere(api, q, with_token(leased, token))
    with pytest.raises(LeaseLostError, match="no token"):
        await q.ack(with_token(leased, None))

    # an ack that also asks for the next job: refused, and the waiting job stays waiting
    bogus = with_token(leased, "999999")
    with pytest.raises(LeaseLostError):
        await q.ack(bogus, claim=1)
    assert await q.counts() == counts(waiting=1, active=1)
    [waiting] = [j for j in await _all_jobs(q, ["1", "2"]) if j.id != leased.id]
    assert (waiting.state, waiting.attempts, waiting.token) == ("waiting", 0, None)
    stored = await q.get_job(leased.id)
    assert (stored.state, stored.token, stored.attempts) == ("active", None, 1)  # token not shown
    assert api.admin.hget(q.keys.jobs + leased.id, "k").decode() == leased.token

    # the real token still works
    await q.ack(leased)
    assert await q.counts() == counts(waiting=1, completed=1, total_completed=1)


async def _all_jobs(q, ids):
    return [await q.get_job(i) for i in ids]


async def test_unknown_job_is_refused(api):
    q = api.queue()
    job = await q.enqueue("t", 1)
    [leased] = await q.claim()
    ghost = with_token(leased, leased.token)
    ghost.id = "ghost"
    snap = api.snapshot()
    with pytest.raises(LeaseLostError, match="no such job"):
        await q.ack(ghost)
    with pytest.raises(LeaseLostError, match="no such job"):
        await q.fail(ghost, "x")
    assert api.snapshot() == snap
    assert (await q.get_job(job.id)).state == "active"


async def test_settled_job_refuses_a_second_ack_or_fail(api):
    q = api.queue(keep_completed=-1)
    await q.enqueue("t", 1)
    [leased] = await q.claim()
    stale = with_token(leased, leased.token)
    await q.ack(leased)
    await _refused_everywhere(api, q, stale)
    assert await q.counts() == counts(completed=1, total_completed=1)


async def test_expired_token_is_refused_after_recovery(api):
    """(Before recovery, a late token is accepted: test_lease_defects.py.)"""
    q = api.queue(lease=0.2, keep_completed=-1)
    job = await q.enqueue("t", {"k": 1})
    [first] = await q.claim()
    await asyncio.sleep(0.3)
    assert await q.counts() == counts(active=1)

    assert await q.recover() == (1, 0)
    assert await q.counts() == counts(waiting=1)
    stored = await q.get_job(job.id)
    assert (stored.state, stored.token) == ("waiting", None)

    other = api.queue(lease=5.0, keep_completed=-1)  # another consumer, its own connections
    [second] = await other.claim()
    assert second.id == job.id
    assert second.attempts == 2
    assert second.token != first.token

    with pytest.raises(LeaseLostError, match="does not hold the lease"):
        await q.ack(first)
    await _refused_everywhere(api, q, first)
    stored = await q.get_job(job.id)
    assert (stored.state, stored.token, stored.error) == ("active", None, None)
    assert api.admin.hget(q.keys.jobs + job.id, "k").decode() == second.token

    await other.ack(second)
    assert await q.counts() == counts(completed=1, total_completed=1)
    with pytest.raises(LeaseLostError):
        await q.ack(first)
    assert await q.counts() == counts(completed=1, total_completed=1)


async def test_lease_expiry_redelivers_and_exactly_one_ack_wins(api):
    q = api.queue(lease=0.2, max_attempts=3)
    jobs = await q.enqueue_many([("t", i) for i in range(3)])
    slow = await q.claim(count=3)
    assert len(slow) == 3
    await asyncio.sleep(0.3)
    assert await q.recover(batch=2) == (2, 0)  # bounded by the batch
    assert await q.recover() == (1, 0)
    assert await q.recover() == (0, 0)

    fast = await q.claim(count=3, lease=5.0)
    assert sorted(j.id for j in fast) == sorted(j.id for j in jobs)
    assert all(j.attempts == 2 for j in fast)

    # both holders try to ack every job, interleaved: exactly one ack per job succeeds
    winners = sorted((j.id, j.token) for j in fast)
    results = []
    for old, new in zip(sorted(slow, key=lambda j: j.id), sorted(fast, key=lambda j: j.id), strict=True):
        for holder in (old, new):
            token = holder.token
            try:
                await q.ack(holder)
                results.append((holder.id, token))
            except LeaseLostError:
                pass
    assert sorted(results) == winners  # only the current holders' acks count, once per job
    assert await q.counts() == counts(total_completed=3)


async def test_concurrent_acks_of_a_redelivered_job(api):
    q = api.queue(lease=0.2)
    await q.enqueue("t", 1)
    [old] = await q.claim()
    await asyncio.sleep(0.3)
    assert await q.recover() == (1, 0)
    [new] = await q.claim(lease=5.0)
    outcomes = await asyncio.gather(q.ack(old), q.ack(new), return_exceptions=True)
    assert sum(o == [] for o in outcomes) == 1
    assert sum(isinstance(o, LeaseLostError) for o in outcomes) == 1
    assert await q.counts() == counts(total_completed=1)


async def test_recover_fails_a_job_whose_attempts_are_used_up(api):
    q = api.queue(lease=0.2)
    job = await q.enqueue("t", 1, max_attempts=1)
    [leased] = await q.claim()
    await asyncio.sleep(0.3)
    assert await q.recover() == (0, 1)
    assert await q.counts() == counts(failed=1, total_failed=1)
    stored = await q.get_job(job.id)
    assert stored.state == "failed"
    assert "lease expired" in stored.error
    with pytest.raises(LeaseLostError):
        await q.ack(leased)


async def test_extend_keeps_the_lease_alive(api):
    q = api.queue(lease=0.3)
    await q.enqueue("t", 1)
    [leased] = await q.claim()
    for _ in range(4):
        await asyncio.sleep(0.15)
        await q.extend(leased)
    assert await q.recover() == (0, 0)  # 0.6 s after the claim, the lease still holds
    await q.ack(leased)
    assert await q.counts() == counts(total_completed=1)


async def test_release_gives_the_job_back(api):
    q = api.queue()
    jobs = await q.enqueue_many([("t", 1), ("t", 2)])
    claimed = await q.claim(count=2)
    assert await q.release(claimed) == [1, 1]
    assert await q.counts() == counts(waiting=2)
    again = await q.claim(count=2)
    assert sorted(j.id for j in again) == sorted(j.id for j in jobs)
    assert [j.attempts for j in again] == [1, 1]  # unstarted: the attempt was given back
    assert await q.release(again[:1], started=True) == [1]
    [third] = await q.claim()
    assert third.attempts == 2
    with pytest.raises(LeaseLostError):
        await q.ack(again[0])


async def test_released_jobs_keep_their_order(api):
    """Jobs released together (shutdown, over-claim) return to the front in their original order."""
    q = api.queue()
    jobs = await q.enqueue_many([("t", i) for i in range(3)])
    claimed = await q.claim(count=2)
    assert [j.id for j in claimed] == [j.id for j in jobs[:2]]
    await q.release(claimed)
    again = await q.claim(count=3)
    assert [j.id for j in again] == [j.id for j in jobs]


async def test_a_worker_that_wakes_late_for_its_heartbeats_says_so(api, caplog):
    """An event loop blocked for over a third of the lease leaves the leases unrenewed: the worker
    warns that the jobs it holds may run twice (the at-least-once case of the README)."""
    if not api.is_async:
        pytest.skip("a handler cannot hold up a thread worker's maintenance thread")
    q = api.queue(lease=0.6, maintenance_interval=0.1)

    async def blocks_the_loop(job):
        while "late for its heartbeats" not in caplog.text:
            await asyncio.sleep(0.05)  # maintenance (on a loaded machine, still in a call) gets to sleep
            time.sleep(0.5)  # a blocking call in an async handler: no heartbeat for 0.5 s

    w = api.worker(q, {"t": blocks_the_loop})
    caplog.set_level(logging.WARNING, logger="conveyor.worker")
    await q.enqueue("t")
    await wait_until(lambda: "late for its heartbeats" in caplog.text, timeout=10, what="the warning")
    assert "1 jobs it holds may have been redelivered and may run twice" in caplog.text
    w.worker.stop()
    await w.join(10)
