"""Audit of results, cancellation, per-key limits and priorities: each test failed before its fix."""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    wait_until,
)
from conveyor import ConveyorError, JobSpec


def _waiting(q) -> int:
    return len(q.inner._results.registry.waiting)


async def test_a_socket_timeout_under_a_second_still_serves_result_waiters(api, caplog):
    """The result reader's XREAD blocked 1 s whatever the client's socket timeout: with
    socket_timeout=0.3 every idle read raised TimeoutError, the reader logged 'lost the server'
    again and again and never did its idle re-read, so a waiter whose job finished without a
    record (workers storing no results) waited out its whole timeout instead of being told."""
    q = api.queue(store_results=True, socket_timeout=0.3)
    workers_queue = api.queue(store_results=False)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(q.result(job.id, 8))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    await asyncio.sleep(1.0)  # idle reads
    [claimed] = await workers_queue.claim()
    await workers_queue.ack(claimed, result="not stored")
    started = time.monotonic()
    with pytest.raises(ConveyorError, match="has no stored result"):
        await asyncio.wait_for(waiter, 10)
    assert time.monotonic() - started < 3
    assert "lost the server" not in caplog.text


async def test_retried_failed_jobs_are_claimed_in_the_order_given(api):
    """retry_failed put each job at the claim end in turn, so the last one given (or the newest
    failure, for all) ran first: ids [1, 2, 3] were claimed 3, 2, 1, where release() and lease
    recovery keep the order they are given, and FIFO within a level says the same."""
    q = api.queue(keep_failed=-1, max_attempts=1)
    ids = [j.id for j in await q.enqueue_many([JobSpec("t", i) for i in range(3)])]
    high = [j.id for j in await q.enqueue_many([JobSpec("t", i, priority=4) for i in range(2)])]
    for job_id in [*high, *ids]:
        [job] = await q.claim()
        assert job.id == job_id
        await q.fail(job, "boom", retry=False)
    assert await q.retry_failed(ids) == 3
    assert [j.id for j in await q.jobs("waiting")] == ids
    assert [j.id for j in await q.claim(count=3)] == ids
    assert await q.retry_failed() == 2  # all: the oldest failure first
    assert [j.id for j in await q.claim(count=3)] == high
