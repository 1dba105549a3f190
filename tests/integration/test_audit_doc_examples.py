"""Audit of the documentation as a new user reads it: the API reference (docs/api.md, rendered from
the docstrings) and the pages' claims about what a call returns. Each test failed before its fix."""

from __future__ import annotations

from _support import api_fixture  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import AsyncQueue, Queue


async def test_fail_returns_only_the_outcomes_its_reference_names(api):
    """The reference said fail() returns 'retry' or 'failed'; on a job whose cancel was requested
    (production.md: "queue.fail(job, ...) then settles it as cancelled") it returns 'cancelled', so
    code that matched the two documented outcomes took a cancelled job for a retried one."""
    q = api.queue(max_attempts=3)
    job = await q.enqueue("t", 1)
    [claimed] = await q.claim()
    assert await q.cancel(job.id)
    await q.extend(claimed)
    assert claimed.cancelled
    outcome = await q.fail(claimed, "stopped")
    assert outcome == "cancelled"
    assert (await q.get_job(job.id)).state == "cancelled"
    for cls in (Queue, AsyncQueue):
        assert f"'{outcome}'" in (cls.fail.__doc__ or ""), f"{cls.__name__}.fail does not name {outcome!r}"
