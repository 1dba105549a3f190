"""Deduplication window: a caller-given id dedups for dedup_window seconds after its job finished,
the same after success and after failure; generated ids never dedup."""

from __future__ import annotations

import asyncio

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import QueueSettings


async def _finish(q, job_id: str, ok: bool) -> None:
    await q.enqueue("t", {"v": 1}, job_id=job_id)
    [job] = await q.claim()
    if ok:
        await q.ack(job)
    else:
        await q.fail(job, "boom", retry=False)


@pytest.mark.parametrize("ok", [True, False], ids=["completed", "failed"])
async def test_same_window_after_success_and_after_failure(api, ok):
    q = api.queue(dedup_window=0.6, max_attempts=1)  # keep_completed 0, keep_failed 10000
    await _finish(q, "order-1", ok)
    again = await q.enqueue("t", {"v": 2}, job_id="order-1")
    assert again.created is False
    assert again.state in ("finished", "failed")  # completed: record gone; failed: retained
    assert await q.counts() == counts(failed=0 if ok else 1, total_completed=int(ok),
                                      total_failed=int(not ok))
    await asyncio.sleep(0.7)
    fresh = await q.enqueue("t", {"v": 3}, job_id="order-1")
    assert fresh.created is True
    [job] = await q.claim()
    assert (job.id, job.payload, job.attempts) == ("order-1", {"v": 3}, 1)
    # the replaced failed job left the failed set
    assert (await q.counts())["failed"] == 0


async def test_without_a_window_behaviour_is_unchanged(api):
    q = api.queue(max_attempts=1)
    await _finish(q, "a-ok", True)
    assert (await q.enqueue("t", None, job_id="a-ok")).created is True  # gone at ack
    await _finish(q, "a-bad", False)
    assert (await q.enqueue("t", None, job_id="a-bad")).created is False  # retained failed job


async def test_zero_window_never_dedups_a_finished_job(api):
    q = api.queue(dedup_window=0, max_attempts=1)
    await _finish(q, "z", False)
    assert (await q.enqueue("t", None, job_id="z")).created is True


async def test_window_entries_are_trimmed_and_generated_ids_are_not_kept(api):
    q = api.queue(dedup_window=0.2, keep_completed=0)
    await _finish(q, "keep-me", True)
    generated = await q.enqueue("t", None)
    [job] = await q.claim()
    assert job.id == generated.id
    await q.ack(job)
    assert api.admin.zrange(q.keys.dedup, 0, -1) == [b"keep-me"]
    await asyncio.sleep(0.3)
    await q.trim()
    assert api.admin.exists(q.keys.dedup) == 0


def test_dedup_window_is_validated():
    with pytest.raises(ValueError, match="dedup_window"):
        QueueSettings(dedup_window=-1)


async def test_worker_and_recovery_record_the_window(api):
    """Finishing through a worker (ack) and through lease recovery (failed) both remember the id."""
    q = api.queue(dedup_window=30, lease=0.1, max_attempts=1)
    w = api.worker(q, {"t": api.handler()})
    await q.enqueue("t", None, job_id="via-worker")
    await wait_until(lambda: api.admin.zscore(q.keys.dedup, "via-worker") is not None, timeout=10,
                     what="the worker's ack to remember the id")
    w.stop()
    await w.join(10)
    await q.enqueue("t", None, job_id="via-recovery")
    await q.claim()
    await asyncio.sleep(0.2)
    assert await q.recover() == (0, 1)
    assert api.admin.zscore(q.keys.dedup, "via-recovery") is not None
    assert (await q.enqueue("t", None, job_id="via-worker")).created is False


async def test_an_id_used_again_after_a_cancel_is_not_deleted_by_the_cancelled_retention(api):
    """A job cancelled while running, its id enqueued again once the window passed: the new job
    must survive the cancelled set's retention. Before, the id stayed in the cancelled set, and
    trim (by age) deleted the new job's hash: accepted, never run, never shown as failed."""
    q = api.queue(dedup_window=0, failed_max_age=0.5)
    await q.enqueue("t", {"n": 1}, job_id="order-1")
    [job] = await q.claim()
    assert await q.cancel("order-1") is True
    await q.extend(job)  # the holder learns of the cancel
    assert await q.fail(job, "stopped", retry=False) == "cancelled"
    again = await q.enqueue("t", {"n": 2}, job_id="order-1")
    assert again.created is True
    await asyncio.sleep(0.6)
    await q.trim()  # what every worker's maintenance runs
    assert (await q.get_job("order-1")).payload == {"n": 2}
    [claimed] = await q.claim()
    assert claimed.payload == {"n": 2}


async def test_a_deduplicated_job_whose_record_is_gone_has_no_payload(api):
    """Within the window a completed job's record is gone: the returned job says 'finished' and
    carries no payload. Before, its payload was the empty bytes of the missing field, and reading
    it raised a misleading 'cannot be decoded' error."""
    q = api.queue(dedup_window=30, keep_completed=0)
    await _finish(q, "gone-1", True)
    again = await q.enqueue("t", {"v": 2}, job_id="gone-1")
    assert (again.created, again.state) == (False, "finished")
    assert again.raw_payload is None and again.payload is None
