"""close() / aclose() while another caller's script call is in flight on the queue's held
connection (the one a lone caller keeps checked out between calls, ``_direct.HeldScripts``).

Before the fix, close() handed that connection back to the pool while the call still read its
reply on it: a call made after close() (redis-py reopens connections) could take the same
connection, so two callers shared one socket. In CI an enqueue made just after close() failed
with 'lost the connection ... during the call' when the first caller's error handler
disconnected the socket the second had reconnected. Here the first caller is held after its
read ends (as a thread or task not yet scheduled again would be) so the window stays open. Both
tests failed before the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from _support import wait_until
from conveyor import AsyncQueue, Queue, QueueClosedError

from bench.servers import RunningServer


@pytest.fixture
def admin(server: RunningServer) -> Iterator[redis.Redis]:
    if server.family == "dragonfly":
        pytest.skip("dragonfly: CLIENT PAUSE WRITE is checked on Redis and Valkey")
    client = redis.Redis.from_url(server.url)
    yield client
    client.execute_command("CLIENT", "UNPAUSE")
    client.close()


def _ignore_errors(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(Exception):  # QueueClosedError, unless the call completed
            call(*args, **kwargs)

    return run


def _blocked_evalsha(admin: redis.Redis) -> bool:
    """A script call is waiting for its reply (held by CLIENT PAUSE WRITE: flag b). The held
    connection's last command is already EVALSHA (the first enqueue's) before the call is sent."""
    return any(c.get("cmd") == "evalsha" and "b" in c.get("flags", "") for c in admin.client_list())


def test_a_sync_close_does_not_hand_out_the_connection_a_call_in_flight_is_reading(
    server: RunningServer, admin: redis.Redis, queue_name: str
) -> None:
    # socket_timeout 2: a thread entering its read as close() closes the socket can poll the
    # closed descriptor's number, reused by a new connection, until its timeout (see close())
    queue = Queue.from_url(server.url, queue_name, socket_timeout=2)
    queue.enqueue("t", 0)  # the held connection is checked out, the layout checked
    held = queue._held
    assert held is not None and held._conn is not None
    reading = held._conn
    read, resume = reading.read_response, threading.Event()

    def slow_read(*args: Any, **kwargs: Any) -> Any:
        try:
            return read(*args, **kwargs)
        finally:
            resume.wait(10)  # the thread is not scheduled again yet

    reading.read_response = slow_read
    admin.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
    thread = threading.Thread(target=_ignore_errors(queue.enqueue, "t", 1, job_id="in-flight"))
    thread.start()
    asyncio.run(wait_until(lambda: _blocked_evalsha(admin), what="the enqueue to wait for its reply"))
    queue.close()
    pool = queue.client.connection_pool
    taken = [pool.get_connection() for _ in range(3)]  # what calls after close() would use
    try:
        assert all(conn is not reading for conn in taken), "a connection in use was handed out"
    finally:
        for conn in taken:
            pool.release(conn)
        admin.execute_command("CLIENT", "UNPAUSE")
        resume.set()
        thread.join(8)
    assert not thread.is_alive()
    assert queue.enqueue("t", 2).payload == 2  # a call after close() opens a connection


async def test_an_async_close_does_not_hand_out_the_connection_a_call_in_flight_is_reading(
    server: RunningServer, admin: redis.Redis, queue_name: str
) -> None:
    queue = AsyncQueue.from_url(server.url, queue_name)
    await queue.enqueue("t", 0)
    lone = queue._lone
    assert lone is not None and lone._conn is not None
    reading = lone._conn
    read, resume = reading.read_response, asyncio.Event()

    async def slow_read(*args: Any, **kwargs: Any) -> Any:
        try:
            return await read(*args, **kwargs)
        finally:
            await asyncio.wait_for(resume.wait(), 10)  # the task is not scheduled again yet

    reading.read_response = slow_read
    admin.execute_command("CLIENT", "PAUSE", 3000, "WRITE")
    call = asyncio.ensure_future(queue.enqueue("t", 1, job_id="in-flight"))
    await wait_until(lambda: _blocked_evalsha(admin), what="the call's wait")
    await queue.aclose()
    pool = queue.client.connection_pool
    taken = [await pool.get_connection() for _ in range(3)]
    try:
        assert all(conn is not reading for conn in taken), "a connection in use was handed out"
    finally:
        for conn in taken:
            await pool.release(conn)
        admin.execute_command("CLIENT", "UNPAUSE")
        resume.set()
    await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 10)
    assert (await queue.enqueue("t", 2)).payload == 2
    await queue.aclose()


def test_a_result_wait_whose_first_read_is_in_flight_at_close_changed_nothing(
    server: RunningServer, admin: redis.Redis, queue_name: str
) -> None:
    """result() first reads the job's record (a read-only script call). In flight when close()
    ran, it raised QueueClosedError with maybe_applied True and advice about repeating an enqueue,
    as if it might have changed the queue; a wait never does (maybe_applied False, as for a wait
    ended by close() while it waited for the result)."""
    queue = Queue.from_url(server.url, queue_name, store_results=True, socket_timeout=2)
    job = queue.enqueue("t", 0)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            queue.result(job.id, 5)
        except BaseException as exc:
            outcome.append(exc)

    admin.execute_command("CLIENT", "PAUSE", 1000, "ALL")  # the read waits (admin's too)
    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)  # the read is sent and held by the pause
    queue.close()
    thread.join(8)
    assert not thread.is_alive()
    [error] = outcome
    assert isinstance(error, QueueClosedError), error
    assert error.maybe_applied is False and "enqueue" not in str(error), error


async def test_an_async_result_wait_whose_first_read_is_in_flight_at_aclose_changed_nothing(
    server: RunningServer, admin: redis.Redis, queue_name: str
) -> None:
    """The asyncio twin of the test above."""
    queue = AsyncQueue.from_url(server.url, queue_name, store_results=True, socket_timeout=2)
    job = await queue.enqueue("t", 0)
    admin.execute_command("CLIENT", "PAUSE", 1000, "ALL")
    waiting = asyncio.ensure_future(queue.result(job.id, 5))
    await asyncio.sleep(0.3)
    await queue.aclose()
    with pytest.raises(QueueClosedError) as caught:
        await asyncio.wait_for(waiting, 8)
    assert caught.value.maybe_applied is False and "enqueue" not in str(caught.value), caught.value
