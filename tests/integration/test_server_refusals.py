"""A server's error replies reach the caller as Conveyor errors naming the server: every error a
caller can meet derives from ConveyorError (conveyor/_errors.py). Out of memory (maxmemory with
noeviction) escaped as redis-py's OutOfMemoryError, a type the caller had no reason to catch."""

from __future__ import annotations

import os
import signal
import time

import pytest
from _support import run_in_thread
from conveyor import ConnectionFailedError, ConveyorError, Queue, Worker
from conveyor._connection import redact_url

from bench.servers import start_server


@pytest.fixture
def full_server(server):
    """A fresh server of the session's kind, with a tiny maxmemory (never the shared one)."""
    if server.family == "dragonfly":
        pytest.skip("Dragonfly's maxmemory is a start flag with a large minimum")
    with start_server(server.kind, extra_args=["--maxmemory", "3mb"]) as srv:
        yield srv


def test_out_of_memory_is_a_conveyor_error_and_writes_nothing(full_server):
    q = Queue.from_url(full_server.url, "oom")
    enqueued = 0
    with pytest.raises(ConveyorError, match="out of memory") as caught:
        while enqueued < 100_000:
            q.enqueue("t", "x" * 1000)
            enqueued += 1
    assert redact_url(full_server.url).split("//")[1].split("/")[0] in str(caught.value)
    with pytest.raises(ConveyorError, match="out of memory"):
        q.enqueue_many([("t", "y")] * 100)
    assert q.counts()["waiting"] == enqueued  # the refused calls wrote nothing
    stats = Worker(q, {"t": lambda job: None}, burst=True, concurrency=4).run()
    assert stats["processed"] == enqueued and q.counts()["waiting"] == 0  # draining still works
    q.close()


@pytest.fixture
def own_server(server):
    """A fresh server of the session's kind, this test's to pause (never the shared one)."""
    with start_server(server.kind) as srv:
        yield srv


def test_a_server_that_does_not_answer_in_time_is_a_conveyor_error(own_server):
    """A frozen server (socket_timeout passed) raised redis-py's TimeoutError, not a ConveyorError,
    and nothing said that the call may have been applied."""
    q = Queue.from_url(own_server.url, "frozen", socket_timeout=0.3)
    q.enqueue("t", 1)  # connected
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        with pytest.raises(ConnectionFailedError, match="did not answer within") as caught:
            q.enqueue("t", 2)
        assert "may have been applied" in str(caught.value)
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    assert q.counts()["waiting"] in (1, 2)
    q.close()


@pytest.mark.parametrize("read", ["counts", "get_job", "failed page", "waiting page"])
def test_a_read_that_times_out_says_nothing_was_changed(own_server, read):
    """A read (counts, get_job, a page of jobs: what 'conveyor info' and 'jobs' send) that timed out
    said the call "may have been applied or not (an enqueue with a job_id is safe to repeat)",
    where a read changes nothing: an operator was sent to check what it did."""
    q = Queue.from_url(own_server.url, "frozen", socket_timeout=0.3)
    q.enqueue("t", 1)  # connected, the layout checked
    calls = {"counts": q.counts, "get_job": lambda: q.get_job("some-id"),
             "failed page": lambda: q.jobs("failed"), "waiting page": lambda: q.jobs("waiting")}  # fmt: skip
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        with pytest.raises(ConnectionFailedError, match="did not answer the read within") as caught:
            calls[read]()
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    assert "nothing was changed" in str(caught.value) and "may have been applied" not in str(caught.value)
    q.close()


async def test_an_async_read_that_times_out_says_nothing_was_changed(own_server):
    """As for Queue: AsyncQueue.counts() and jobs() on a frozen server said a read may have been applied."""
    from conveyor import AsyncQueue  # noqa: PLC0415

    q = AsyncQueue.from_url(own_server.url, "frozen", socket_timeout=0.3)
    await q.enqueue("t", 1)
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        for read in (q.counts(), q.jobs("waiting")):
            with pytest.raises(ConnectionFailedError, match="nothing was changed"):
                await read
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    await q.aclose()


def test_the_result_reader_losing_a_frozen_server_logs_a_read(own_server, caplog):
    """The result reader only reads (XREAD of the events, then the results): when the server did
    not answer it warned that 'the call may have been applied or not (an enqueue with a job_id is
    safe to repeat)', a write's wording, in a log an operator reads during an outage."""
    q = Queue.from_url(own_server.url, "frozen", socket_timeout=0.3, store_results=True)
    job = q.enqueue("t", 1)
    caplog.set_level("WARNING", logger="conveyor.results")
    thread, outcome = run_in_thread(lambda: q.result(job.id, timeout=2.5))
    time.sleep(0.5)  # the reader is in its blocking XREAD
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)  # past the socket timeout: the reader loses the server
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], TimeoutError)  # the job never ran
    lost = [r.getMessage() for r in caplog.records if "result reader lost the server" in r.getMessage()]
    assert lost and all("nothing was changed" in m and "may have been applied" not in m for m in lost)
    q.close()


def test_an_async_queue_used_after_its_event_loop_closed_says_so(redis_url, queue_name):
    """A module-level AsyncQueue used in two asyncio.run() calls failed in the second with
    RuntimeError('Event loop is closed'): no Conveyor error, nothing saying what to do."""
    import asyncio  # noqa: PLC0415

    from conveyor import AsyncQueue  # noqa: PLC0415

    q = AsyncQueue.from_url(redis_url, queue_name)
    asyncio.run(q.enqueue("t", 1))
    with pytest.raises(ConveyorError, match="belongs to the event loop it first ran on") as caught:
        asyncio.run(q.enqueue("t", 2))
    assert "one AsyncQueue per event loop" in str(caught.value)
    q2 = AsyncQueue.from_url(redis_url, queue_name + "-2")
    asyncio.run(q2.counts())
    with pytest.raises(ConveyorError, match="belongs to the event loop it first ran on"):
        asyncio.run(q2.counts())  # any call, not only scripts
