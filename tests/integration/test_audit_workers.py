"""Regression tests of the workers found by an audit of their dispatch, hooks and shutdown.

Each test failed on the code before its fix.
"""

from __future__ import annotations

import asyncio

import pytest
from conveyor import Job, SerializationError
from conveyor._runner import Runner
from test_review_worker import _app


@pytest.mark.parametrize("hook", ["after", "on_failure"])
def test_an_async_hooks_own_cancelled_error_is_ignored_like_any_other_error(redis_url, queue_name, hook):
    """An exception in an ``after`` or ``on_failure`` hook is logged and ignored (the outcome is
    decided); an async hook that raised a CancelledError of its own (it awaited a future cancelled
    elsewhere; the worker had not cancelled it) escaped the hook loop and was taken for the
    attempt's failure, which is retried: a completed job ran again, and a job failed for good (a
    SerializationError is never retried) ran again with its own error text lost."""
    app = _app(redis_url, queue_name, max_attempts=3)
    runs: list[int] = []

    async def raising(job: Job, *_: object) -> None:
        raise asyncio.CancelledError("a future the hook awaited was cancelled")

    getattr(app, hook)(raising)

    @app.task
    def task() -> str:
        runs.append(1)
        if hook == "on_failure":
            raise SerializationError("the task's own error: a rerun fails the same way")
        return "ok"

    job = task.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    stored = app.queue(queue_name).get_job(job.id)
    assert stored is not None, job
    if hook == "after":
        assert stored.state == "completed", stored
    else:
        assert stored.state == "failed" and "the task's own error" in (stored.error or ""), stored
    assert runs == [1]
    app.close()
