"""AsyncQueue.retry_failed / purge_failed cancelled between batches (an asyncio timeout, a shutdown):
the CancelledError still propagates, and says how many jobs the batches that completed re-queued
or deleted, as Queue's BatchesInterrupted does for Ctrl-C."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from _holding_proxy import HoldingProxy
from conveyor import AsyncQueue, Queue
from conveyor._models import JobSpec

from bench.servers import RunningServer, start_server


@pytest.fixture
def own_server(server: RunningServer) -> Iterator[RunningServer]:
    """A fresh server of the session's kind (its connections go through a proxy of this test)."""
    with start_server(server.kind) as srv:
        yield srv


def _failed_jobs(url: str, queue_name: str, batches: int) -> Queue:
    q = Queue.from_url(url, queue_name)
    for _ in range(batches):
        q.enqueue_many([JobSpec("broken", None, max_attempts=1) for _ in range(1000)])
        for job in q.claim(count=1000):
            q.fail(job, "boom")
    assert q.counts()["failed"] == 1000 * batches
    return q


async def _first_batch_applied(q: Queue, proxy: HoldingProxy) -> None:
    """Once the first batch ran (fewer than 2000 failed jobs), the proxy holds back the second:
    delayed 0.1 s in the proxy, it never reaches the server."""
    for _ in range(600):
        if q.counts()["failed"] < 2000:
            proxy.held.set()
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting for the first batch")


@pytest.mark.parametrize(("action", "verb"), [("retry_failed", "re-queued"), ("purge_failed", "deleted")])
async def test_cancelled_between_batches_says_how_many_jobs_were_done(own_server, queue_name, driver,
                                                                      action, verb):  # fmt: skip
    """2000 failed jobs, batches of 1000, the task cancelled once the first batch was applied and
    the second is held back by the proxy: the CancelledError said nothing of the 1000 done."""
    if driver == "glide":
        pytest.importorskip("glide", reason="valkey-glide is not installed")
    q = _failed_jobs(own_server.url, queue_name, 2)
    proxy = HoldingProxy(own_server.host, own_server.port)
    aq = AsyncQueue.from_url(f"redis://127.0.0.1:{proxy.port}/0", queue_name, driver=driver)
    try:
        task = asyncio.ensure_future(getattr(aq, action)(batch=1000))
        await _first_batch_applied(q, proxy)
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
    finally:
        proxy.close()
        await aq.aclose()
    assert task.cancelled()  # still a cancellation, for asyncio and for the caller
    done = 2000 - q.counts()["failed"]
    assert done == 1000
    assert getattr(caught.value, "batches_done", None) == done, caught.value
    note = f"{done} failed job(s) of queue {queue_name} were already {verb} by the batches that completed"
    assert any(note in n for n in getattr(caught.value, "__notes__", [])), caught.value
    q.close()


async def test_a_timeout_between_batches_keeps_the_count_on_its_cause(own_server, queue_name):
    """asyncio.timeout() turns the cancellation into TimeoutError, raised from the CancelledError:
    the count is there, for a caller that bounds a clean-up job's time."""
    q = _failed_jobs(own_server.url, queue_name, 2)
    proxy = HoldingProxy(own_server.host, own_server.port)
    aq = AsyncQueue.from_url(f"redis://127.0.0.1:{proxy.port}/0", queue_name)
    loop = asyncio.get_running_loop()
    try:
        with pytest.raises(TimeoutError) as caught:
            async with asyncio.timeout(60) as deadline:
                watch = asyncio.ensure_future(_first_batch_applied(q, proxy))
                watch.add_done_callback(lambda _: deadline.reschedule(loop.time() + 0.5))
                await aq.retry_failed(batch=1000)
    finally:
        proxy.close()
        await aq.aclose()
    done = 2000 - q.counts()["failed"]
    assert done == 1000 and getattr(caught.value.__cause__, "batches_done", None) == done, caught.value
    q.close()
