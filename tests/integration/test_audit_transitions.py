"""Audit of the atomic state transitions and their client side: defects found, each test failing
before its fix."""

from __future__ import annotations

import pytest
from _support import api_fixture  # noqa: F401 - provides the `api` fixture
from conveyor import JobCancelledError, JobFailedError, JobSpec


async def test_an_existing_job_returned_by_enqueue_has_its_stored_fields(api):
    """Enqueueing a caller-given id that exists returns the existing job (created False). Its
    priority, time limit, error and finish time were not in the enqueue reply: the job read priority
    0 and no time limit (the stored job has level 7 and 3 s), and a failed one no error, where
    get_job() and jobs() report them."""
    q = api.queue()
    first = await q.enqueue("t", 1, job_id="kept", priority=7, time_limit=3)
    again = await q.enqueue("t", 2, job_id="kept")
    assert not again.created
    assert (again.priority, again.time_limit) == (first.priority, first.time_limit) == (7, 3.0)
    [same] = await q.enqueue_many([JobSpec("t", 3, job_id="kept", priority=1)])
    assert (same.created, same.priority, same.time_limit, same.payload) == (False, 7, 3.0, 1)

    assert await q.cancel("kept")
    await q.enqueue("t", job_id="broken", max_attempts=1)
    [job] = await q.claim()
    await q.fail(job, "boom")
    failed = await q.enqueue("t", job_id="broken")
    stored = await q.get_job("broken")
    assert (failed.state, failed.error, failed.finished_at) == ("failed", "boom", stored.finished_at)
    assert failed.finished_at is not None
    assert (failed.priority, failed.time_limit) == (0, None)


async def test_keep_failed_zero_keeps_the_failure_and_cancel_results(api):
    """keep_failed=0 keeps no failed or cancelled job, as keep_completed=0 keeps no completed one;
    a success's result then stays for result_ttl, but a final failure's (and a cancel's) was deleted
    by the same call that stored it: result() said the job had no stored result (ConveyorError)
    instead of raising JobFailedError / JobCancelledError, and the failure was visible nowhere."""
    q = api.queue(keep_failed=0, store_results=True)
    failing = await q.enqueue("t", 1, max_attempts=1)
    stopped = await q.enqueue("t", 2)
    [first, second] = await q.claim(count=2)
    assert await q.fail(first, "boom") == "failed"
    assert await q.cancel(stopped.id)
    assert await q.fail(second, "stopped") == "cancelled"
    assert (await q.counts())["failed"] == (await q.counts())["cancelled"] == 0
    with pytest.raises(JobFailedError) as failed:
        await q.result(failing.id, timeout=1)
    assert (failed.value.error, failed.value.attempts) == ("boom", 1)
    with pytest.raises(JobCancelledError):
        await q.result(stopped.id, timeout=1)
