"""Audit of the atomic state transitions and their client side: defects found, each test failing
before its fix."""

from __future__ import annotations

from _support import api_fixture  # noqa: F401 - provides the `api` fixture
from conveyor import JobSpec


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
