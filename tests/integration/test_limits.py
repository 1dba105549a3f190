"""Time limits and cancellation of running jobs, on every server, sync and asyncio.

A hard time limit bounds each attempt from its claim: an asyncio handler is cancelled at the
limit; a thread cannot be interrupted, so a sync handler is told (``job.cancelled``) and its job
settled at once (failed, not retried, while its thread still runs). Should the worker be gone,
lease recovery settles an attempt past its limit as timed out. ``cancel()`` of an active job marks
it; its worker learns at the next heartbeat and the job ends ``cancelled``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import api_fixture, counts, wait_until  # noqa: F401 - api_fixture provides `api`
from conveyor import Backoff, Job, JobCancelledError, LeaseLostError, Limit, QueueSettings

FAST = {"lease": 0.6, "backoff": Backoff(base=0.01), "maintenance_interval": 0.1}


def stoppable(api, seen: list[str]):
    """A handler that runs until stopped: async sleeps (and is cancelled), sync polls
    ``job.cancelled`` (a thread cannot be interrupted). Records its start and how it ended."""
    if api.is_async:

        async def async_long(job: Job) -> None:
            seen.append("start")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        return async_long

    def sync_long(job: Job) -> None:
        seen.append("start")
        deadline = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append("cancelled" if job.cancelled else "ran out")

    return sync_long


async def _state(q, job_id: str) -> str | None:
    job = await q.get_job(job_id)
    return None if job is None else job.state


async def test_time_limit_stops_a_running_attempt(api):
    q = api.queue(max_attempts=2, **FAST)
    seen: list[str] = []
    w = api.worker(q, {"long": stoppable(api, seen)}, concurrency=2)
    job = await q.enqueue("long", time_limit=0.3)
    t0 = time.monotonic()
    await wait_until(lambda: _state_is(q, job.id, "failed"), timeout=10, what="the job to time out")
    stored = await q.get_job(job.id)
    assert "timed out: the attempt exceeded its time limit of 0.3 s" in stored.error
    if api.is_async:  # cancelled at the limit, retried, cancelled again, then failed
        assert stored.attempts == 2 and seen == ["start", "cancelled"] * 2
        assert time.monotonic() - t0 < 5
    else:  # its thread was still running when settled: failed at once, never run twice at once
        assert stored.attempts == 1 and "not retried" in stored.error
        await wait_until(lambda: seen == ["start", "cancelled"], timeout=5, what="the thread to stop")
    assert await q.counts() == counts(failed=1, total_failed=1)
    w.stop()
    await w.join(5)  # nothing left over holds up the shutdown


async def test_a_thread_past_its_limit_does_not_hold_up_the_shutdown(api):
    if api.is_async:
        pytest.skip("asyncio handlers are cancelled: nothing outlives the limit")
    q = api.queue(**FAST)
    w = api.worker(q, {"stuck": api.handler(sleep=6.0)}, shutdown_timeout=0.5)  # ignores job.cancelled
    job = await q.enqueue("stuck", time_limit=0.2)
    await wait_until(lambda: _state_is(q, job.id, "failed"), timeout=10, what="the job to time out")
    t0 = time.monotonic()
    w.stop()
    stats = await w.join(5)
    # Well before the thread ends (>= 5.8 s after the stop); the margin over the 0.5 s deadline
    # absorbs a loaded CI machine (the stop took 2.0 s twice under the full parallel suite).
    assert time.monotonic() - t0 < 3.0
    assert stats["held"] == 1  # the thread's slot, never its job: that was settled at the limit
    assert await q.counts() == counts(failed=1, total_failed=1)


async def _state_is(q, job_id: str, state: str) -> bool:
    return await _state(q, job_id) == state


async def test_a_job_within_its_limit_and_the_queue_default(api):
    q = api.queue(time_limit=5.0, **FAST)
    default, own = await q.enqueue("quick"), await q.enqueue("quick", time_limit=2.5)
    assert (default.time_limit, own.time_limit) == (5.0, 2.5)
    assert (await q.get_job(own.id)).time_limit == 2.5
    w = api.worker(q, {"quick": api.handler(lambda j: j.time_limit)})
    await wait_until(lambda: _counts_are(q, completed=0, total_completed=2), timeout=10,
                     what="both jobs to complete")
    w.stop()
    await w.join(5)


async def _counts_are(q, **expected) -> bool:
    return await q.counts() == counts(**expected)


async def test_time_limit_passes_while_the_worker_is_gone(api):
    """No heartbeat (the worker died): recovery settles the attempt as timed out, retried while
    attempts remain; a job without a limit is a lost lease as before."""
    q = api.queue(max_attempts=2, lease=0.3)
    limited = await q.enqueue("t", 1, time_limit=0.1)
    plain = await q.enqueue("t", 2)
    first = await q.claim(2)
    assert {j.id: j.time_limit for j in first} == {limited.id: 0.1, plain.id: None}
    await asyncio.sleep(0.45)
    with pytest.raises(LeaseLostError, match="ran past its time limit"):
        await q.extend(next(j for j in first if j.id == limited.id))
    await asyncio.sleep(0.1)
    assert await q.recover() == (2, 0)
    again = await q.get_job(limited.id)
    assert again.state == "waiting"
    assert again.error == "timed out: the attempt exceeded its time limit of 0.1 s after attempt 1 of 2"
    assert (await q.get_job(plain.id)).error is None
    await q.claim(2)
    await asyncio.sleep(0.45)
    assert await q.recover() == (0, 2)
    failed = {j.id: j.error for j in await q.jobs("failed")}
    assert failed == {
        limited.id: "timed out: the attempt exceeded its time limit of 0.1 s after attempt 2 of 2",
        plain.id: "lease expired after attempt 2 of 2",
    }


async def test_cancel_of_an_active_job(api):
    q = api.queue(**FAST)
    seen: list[str] = []
    w = api.worker(q, {"long": stoppable(api, seen)})
    job = await q.enqueue("long")
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    t0 = time.monotonic()
    assert await q.cancel(job.id) is True
    await wait_until(lambda: _state_is(q, job.id, "cancelled"), timeout=5, what="the job to end cancelled")
    learned = time.monotonic() - t0
    assert learned < FAST["lease"] / 3 + 1.0, learned  # the next heartbeat, plus load allowance
    await wait_until(lambda: seen == ["start", "cancelled"], timeout=5, what="the handler to stop")
    assert await q.counts() == counts(cancelled=1)
    [listed] = await q.jobs("cancelled")
    assert (listed.id, listed.state, listed.attempts) == (job.id, "cancelled", 1)
    w.stop()
    stats = await w.join(5)
    assert stats["held"] == 0


async def test_cancel_of_an_active_job_whose_worker_is_gone(api):
    """Recovery cannot know whether the dead worker had started the job: its result said
    'cancelled while running' (this one never started); it now says the lease expired."""
    q = api.queue(lease=0.3, max_attempts=3, store_results=True)
    job = await q.enqueue("t")
    await q.claim()
    assert await q.cancel(job.id) is True
    await asyncio.sleep(0.45)
    assert await q.recover() == (0, 1)  # ended cancelled, not redelivered
    assert await q.counts() == counts(cancelled=1)
    assert (await q.get_job(job.id)).state == "cancelled"
    assert await q.cancel(job.id) is False
    with pytest.raises(JobCancelledError, match="worker's lease expired") as cancelled:
        await q.result(job.id, timeout=1)
    assert "while running" not in str(cancelled.value)


async def test_a_cancelled_job_given_back_ends_cancelled_not_run_again(api):
    """cancel() of a held job, then its worker gives it back (shutdown before its next heartbeat,
    or a prefetched job never started): it ends cancelled, as recovery would end it. Before, the
    release requeued it with its cancel mark and the next worker ran it to completion."""
    q = api.queue(lease=30, max_attempts=3, store_results=True)
    started, unstarted, plain = [await q.enqueue("t") for _ in range(3)]
    held = await q.claim(3)
    assert await q.cancel(started.id) is True and await q.cancel(unstarted.id) is True
    assert await q.release(held[:1], started=True) == [2]
    assert await q.release(held[1:], started=False) == [2, 1]
    assert await q.counts() == counts(waiting=1, cancelled=2)
    assert [j.id for j in await q.claim(3)] == [plain.id]  # never the cancelled ones
    for job, said in ((started, "cancelled while running"), (unstarted, "cancelled before it ran")):
        assert (await q.get_job(job.id)).state == "cancelled"
        with pytest.raises(JobCancelledError, match=said):
            await q.result(job.id, timeout=1)


async def test_a_cancel_just_before_a_shutdown_is_kept(api):
    """The worker is stopped right after cancel(), before the heartbeat that tells it: the
    handler's job is given back at the deadline and must end cancelled, never run again."""
    if not api.is_async:
        pytest.skip("a thread handler's job is not given back: its lease expires, recovery ends it")
    q = api.queue(lease=30, maintenance_interval=30, max_attempts=3)
    seen: list[str] = []
    w = api.worker(q, {"long": stoppable(api, seen)}, shutdown_timeout=0.3)
    job = await q.enqueue("long")
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    assert await q.cancel(job.id) is True
    w.stop()
    await w.join(10)
    assert (await q.get_job(job.id)).state == "cancelled"
    assert await q.counts() == counts(cancelled=1)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "1"])
async def test_bad_time_limits_are_refused_naming_the_value(api, bad):
    q = api.queue()
    with pytest.raises(ValueError, match=f"time_limit must be a number of seconds > 0, got {bad!r}"):
        await q.enqueue("t", time_limit=bad)
    refusal = f"time_limit must be None or a finite number of seconds > 0, got {bad!r}"
    with pytest.raises(ValueError, match=refusal):
        QueueSettings(time_limit=bad)
    assert await q.counts() == counts()


async def test_a_cancelled_job_given_back_frees_its_key_and_wakes_a_worker_for_the_parked_one(api):
    """Ended cancelled at release, a job of a limited key frees its slot: the job parked behind
    it is made ready and the wake-up marker set, so idle workers claim it at once."""
    from conveyor import Limit  # noqa: PLC0415

    q = api.queue(lease=30)
    limit = Limit("one-at-a-time", concurrency=1)
    first = await q.enqueue("t", 1, limit=limit)
    [held] = await q.claim()
    parked = await q.enqueue("t", 2, limit=limit)
    assert await q.claim() == []  # parked behind the held one
    assert await q.cancel(first.id) is True
    api.admin.delete(q.keys.marker)
    assert await q.release([held], started=True) == [2]
    assert api.admin.zcard(q.keys.marker) == 1  # idle workers are woken
    assert [j.id for j in await q.claim()] == [parked.id]


async def test_a_thread_past_its_time_limit_holds_its_limit_keys_slot_until_it_returns(api):
    """production.md (Limits): a handler stopped by its time limit is settled at once (failed).
    A thread cannot be interrupted: its key's slot stays held until it returns, so the key's next
    job starts after it (before the hold, it started beside it, over the key's concurrency). An
    asyncio handler is cancelled: its slot is freed at once, and the next job starts then."""
    q = api.queue(**FAST)
    limit = Limit("one-at-a-time", concurrency=1)
    spans: dict[str, list[float]] = {}
    handler = api.handler(lambda job: spans[job.payload].append(time.monotonic()), sleep=2.5,
                          start=lambda job: spans.setdefault(job.payload, [time.monotonic()]))  # fmt: skip
    api.worker(q, {"t": handler}, concurrency=2)
    late = await q.enqueue("t", "late", limit=limit, time_limit=0.2)
    await q.enqueue("t", "next", limit=limit)
    await wait_until(lambda: "late" in spans, timeout=10, what="the limited job to start")
    await wait_until(lambda: _state_is(q, late.id, "failed"), timeout=10, what="the stopped job to fail")
    assert len(spans["late"]) == 1  # settled at its limit, while its handler still ran
    assert (await q.get_job(late.id)).error.startswith("timed out")
    await wait_until(lambda: "next" in spans, timeout=10, what="the key's next job to start")
    if api.is_async:  # cancelled at its limit: it never reached its end, and freed its slot then
        assert len(spans["late"]) == 1 and spans["next"][0] < spans["late"][0] + 2.5
    else:  # the thread ran to its end, and the key's next job started only after it
        assert len(spans["late"]) == 2 and spans["next"][0] >= spans["late"][1]
