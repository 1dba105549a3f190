"""Audit of the documentation as a new user reads it: the API reference (docs/api.md, rendered from
the docstrings) and the pages' claims about what a call returns. Each test failed before its fix."""

from __future__ import annotations

import inspect

import pytest
from _support import api_fixture  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import AsyncQueue, ConveyorError, Queue


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


async def test_waiting_for_a_job_enqueue_many_to_sent_to_another_queue_names_that_queue(api):
    """high-availability.md's enqueue_many_to example returns jobs of other queues. Their
    job.result() raised "was not returned by a queue; use queue.result(job_id)": followed on the
    queue that sent them, that advice waited for (and returned) the result of another job, the
    one of the same id in the sending queue. The error now names the job's own queue."""
    sender = api.queue(store_results=True)
    other = f"{sender.name}-other"
    own = await sender.enqueue("t", 1)
    [elsewhere] = (await sender.enqueue_many_to({other: [("t", 2)]}))[other]
    assert elsewhere.id == own.id  # ids are per queue: the advice's queue.result() found `own`
    with pytest.raises(ConveyorError, match=f"queue '{other}'"):
        await _awaited(elsewhere.result(timeout=0))


async def _awaited(value):
    return await value if inspect.isawaitable(value) else value


async def test_what_a_worker_run_returns_is_documented(api):
    """index.md's quick start ends with `Worker(...).run()`; the reference did not say what run()
    returns, nor what ``stats`` holds (no docstring): processed counted completed jobs only (the
    `conveyor worker` log calls it "completed"), failed every failed attempt, held the slots in use."""
    q = api.queue(max_attempts=1)
    await q.enqueue("ok", 1)
    await q.enqueue("bad", 2)

    def boom(job):
        raise RuntimeError("boom")

    worker = api.worker(q, {"ok": api.handler(), "bad": api.handler(boom)}, burst=True)
    stats = await worker.join(30)
    assert stats == {"processed": 1, "failed": 1, "held": 0}
    cls = type(worker.worker)
    for key in stats:
        assert f"``{key}``" in (cls.run.__doc__ or ""), f"{cls.__name__}.run does not say what {key!r} is"
    assert (cls.stats.__doc__ or "").strip(), f"{cls.__name__}.stats has no docstring"
