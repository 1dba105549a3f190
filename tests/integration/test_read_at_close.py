"""A read cut off by close() / aclose(): QueueClosedError says nothing was changed (maybe_applied
False), where it said the call 'may have been applied or not', a write's outcome, for a read."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import pytest
from _support import run_in_thread
from conveyor import AsyncQueue, Queue, QueueClosedError

from bench.servers import RunningServer, start_server

READS = ["counts", "get_job", "failed page", "waiting page"]


@pytest.fixture
def paused(server: RunningServer) -> Iterator[RunningServer]:
    """A fresh server of the session's kind (never the shared one), stopped by SIGSTOP once the
    test calls the function it gets: it accepts connections and answers nothing."""
    with start_server(server.kind) as srv:
        try:
            yield srv
        finally:
            os.kill(srv.pid, signal.SIGCONT)


def _reads(q: Queue | AsyncQueue) -> dict[str, object]:
    return {"counts": q.counts, "get_job": lambda: q.get_job("some-id"),
            "failed page": lambda: q.jobs("failed"), "waiting page": lambda: q.jobs("waiting")}  # fmt: skip


def _said_nothing_changed(error: BaseException | None) -> None:
    assert isinstance(error, QueueClosedError), repr(error)
    assert error.maybe_applied is False, error
    assert "nothing was changed" in str(error) and "may have been applied" not in str(error), error


@pytest.mark.parametrize("read", READS)
def test_a_read_in_flight_at_close_says_nothing_was_changed(paused, queue_name, read):
    """Queue.counts(), get_job(), jobs() in flight when close() ran (the server not answering)."""
    q = Queue.from_url(paused.url, queue_name, socket_timeout=3)
    q.enqueue("t", 1)  # connected, the layout checked
    os.kill(paused.pid, signal.SIGSTOP)
    thread, outcome = run_in_thread(_reads(q)[read])  # type: ignore[arg-type]
    time.sleep(0.3)  # sent, waiting for the reply
    q.close()
    thread.join(10)
    assert len(outcome) == 1, outcome
    _said_nothing_changed(outcome[0])


@pytest.mark.parametrize("read", READS)
async def test_an_async_read_in_flight_at_aclose_says_nothing_was_changed(paused, queue_name, driver, read):
    """The AsyncQueue twins, with either driver (glide raises its own QueueClosedError)."""
    if driver == "glide":
        pytest.importorskip("glide", reason="valkey-glide is not installed")
    q = AsyncQueue.from_url(paused.url, queue_name, socket_timeout=3, driver=driver)
    await q.enqueue("t", 1)
    os.kill(paused.pid, signal.SIGSTOP)
    call = asyncio.ensure_future(_reads(q)[read]())  # type: ignore[operator]
    await asyncio.sleep(0.3)
    await q.aclose()
    outcome = (await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 10))[0]
    _said_nothing_changed(outcome)
