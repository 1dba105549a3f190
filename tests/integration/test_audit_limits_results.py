"""Audit of results, cancellation, per-key limits and priorities: each test failed before its fix."""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import ConveyorError, JobSpec, Limit, Queue, _queue_admin


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
    claimed = await q.claim(count=3)
    assert [j.id for j in claimed] == ids
    assert await q.retry_failed() == 2  # all: the oldest failure first
    assert [j.id for j in await q.claim(count=3)] == high
    for job in claimed:
        await q.fail(job, "again", retry=False)
    assert await q.retry_failed(ids, batch=2) == 3  # two script calls: [3], then [1, 2]
    assert [j.id for j in await q.claim(count=3)] == ids


def _due_in(api, q, job_id: str) -> float:
    """Ms until the delayed job ``job_id`` is due."""
    return api.admin.zscore(q.keys.delayed, job_id) - api.server_ms()


async def test_cancelling_a_rate_delayed_job_gives_back_its_reserved_start(api):
    """A job over its key's rate reserves the key's next start and waits in the delayed set for
    it. Cancelling it kept the reservation: the key's next job waited a whole interval behind
    the cancelled one (rate 0.5/s: due in 4 s instead of 2 s). The latest reservation is given
    back; an earlier one is not (the jobs behind it already hold their own later starts)."""
    q = api.queue()
    limit = Limit("rated", rate=0.5)  # starts 2 s apart
    first, second = (j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(2)]))
    [running] = await q.claim(count=2)
    assert running.id == first
    assert 1500 < _due_in(api, q, second) <= 2000
    assert await q.cancel(second)
    third = (await q.enqueue("t", 3, limit=limit)).id
    assert await q.claim() == []
    assert 1500 < _due_in(api, q, third) <= 2000  # the start the cancelled job gave back

    fourth = (await q.enqueue("t", 4, limit=limit)).id
    assert await q.claim() == []
    assert 3500 < _due_in(api, q, fourth) <= 4000
    assert await q.cancel(third)  # not the latest reservation: kept, the fourth keeps its time
    fifth = (await q.enqueue("t", 5, limit=limit)).id
    assert await q.claim() == []
    assert 5500 < _due_in(api, q, fifth) <= 6000
    assert await q.counts() == counts(delayed=2, active=1)


async def test_result_on_a_server_that_stops_answering_returns_near_its_timeout(api):
    """result(timeout=T) first reads the job once, then waits for its event; the wait was given
    the whole T again after that read, and the asyncio twin's read was not bounded by T at all.
    On a server that stopped answering for 2 s (CLIENT PAUSE, as during a failover) result(timeout=1)
    raised TimeoutError after 3 s on both twins. Now the asyncio twin stops at T; the sync twin's
    read is a blocking call that ends with the pause (or socket_timeout), and no wait follows it."""
    q = api.queue(store_results=True)
    job = await q.enqueue("t", None)
    api.admin.execute_command("CLIENT", "PAUSE", 2000, "ALL")
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"did not finish within 1\.0 s"):
            await q.result(job.id, 1.0)
        elapsed = time.monotonic() - started
    finally:
        await asyncio.sleep(max(0.0, started + 2.1 - time.monotonic()))  # the pause ends
    assert elapsed < (1.6 if api.is_async else 2.6), elapsed
    [claimed] = await q.claim()
    await q.ack(claimed, result="after the pause")
    assert await q.result(job.id, 5) == "after the pause"


async def test_a_job_that_changes_state_while_listed_is_left_out(api, monkeypatch):
    """jobs(state) reads the page's ids, then the jobs; its docstring says jobs that change state
    in between are left out, but they were listed with their new state: a failed job retried
    meanwhile appeared in jobs('failed') as a waiting job."""
    q = api.queue(keep_failed=-1, max_attempts=1)
    first, second = (j.id for j in await q.enqueue_many([JobSpec("t", i) for i in range(2)]))
    for job in await q.claim(count=2):
        await q.fail(job, "boom", retry=False)
    operator = Queue.from_url(api.server.url, q.name)
    read_ids = _queue_admin.listed_ids

    def retried_meanwhile(reply):
        ids = read_ids(reply)
        operator.retry_failed([first])  # between the page's ids and the jobs' hashes
        return ids

    monkeypatch.setattr(_queue_admin, "listed_ids", retried_meanwhile)
    try:
        listed = await q.jobs("failed")
    finally:
        operator.close()
    assert [(j.id, j.state) for j in listed] == [(second, "failed")]


async def test_closing_a_queue_with_a_waiter_logs_no_lost_server(api, caplog):
    """close() fails every waiter and closes the client, which cuts the sync reader's blocking
    XREAD: the reader then logged 'result reader lost the server ...; retrying' at every close
    with a waiter, a server fault that did not happen."""
    q = api.queue(store_results=True)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(q.result(job.id, None))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    await asyncio.sleep(0.3)  # the reader blocks in XREAD
    await q.close()
    with pytest.raises(ConveyorError, match="was closed while waiting"):
        await asyncio.wait_for(waiter, 5)
    await asyncio.sleep(1.2)  # past the reader's block
    assert "lost the server" not in caplog.text
