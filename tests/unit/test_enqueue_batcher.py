"""Enqueue batching without a server: who waits, what one call carries, cancelled callers."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

from conveyor import QueueSettings
from conveyor._batching import AsyncEnqueueBatcher, EnqueueBatcher
from conveyor._ops import QueueCore

_ids = itertools.count(1)


def jobs_in(args: list[Any]) -> int:
    """How many jobs an enqueue call carries: ARGV is the window, then 5 values per job."""
    return (len(args) - 1) // 5


def fake_reply(args: list[Any]) -> list[Any]:
    """What enqueue.lua returns: a job whose given id starts with "old" already exists (its 9
    stored fields: task, payload, attempts, max attempts, enqueued, finished, priority, time
    limit, error)."""
    reply: list[Any] = [1_000]
    existing: list[Any] = []
    for i in range(jobs_in(args)):
        given = args[1 + 5 * i]
        if given.startswith("old"):
            reply += [given.encode(), 0, b"a"]
            existing += [b"old-task", b'"stored"', 2, 5, 900, b"", b"", b"", b""]
        else:
            reply += [str(next(_ids)).encode(), 1, b"w"]
    return reply + existing


class HeldCalls:
    """A fake ``run`` (sync and async) whose calls each return when released, in any order;
    a call given an error raises it instead."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.release: list[threading.Event] = [threading.Event() for _ in range(8)]
        self.errors: dict[int, BaseException] = {}

    def _reply(self, n: int, call: Any) -> Any:
        if n in self.errors:
            raise self.errors[n]
        return call.parse(fake_reply(list(call.args)))

    def sync(self, call: Any) -> Any:
        n = len(self.sizes)
        self.sizes.append(jobs_in(list(call.args)))
        assert self.release[n].wait(10)
        return self._reply(n, call)

    async def run(self, call: Any) -> Any:
        n = len(self.sizes)
        self.sizes.append(jobs_in(list(call.args)))
        while not self.release[n].is_set():
            await asyncio.sleep(0.001)
        return self._reply(n, call)


async def until(condition: Any) -> None:
    """Let the loop run until ``condition()`` holds (the test fails after 5 s)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), 5)


def group(core: QueueCore, n: int, job_id: str | None = None) -> tuple[Any, ...]:
    return core.pack("t", {"n": n}, job_id, 0.0, None, priority=0)


def held_first_call(sizes: list[int], release: asyncio.Event) -> Any:
    """A fake ``run`` recording each call's job count; the first call returns once released."""

    async def run(call: Any) -> Any:
        sizes.append(jobs_in(list(call.args)))
        if len(sizes) == 1:
            await release.wait()
        return call.parse(fake_reply(list(call.args)))

    return run


async def test_each_caller_gets_its_own_job_from_a_shared_call() -> None:
    """Created and existing jobs mixed in one call: each caller gets the job its own call would
    have returned (the existing one with the stored fields)."""
    core, sizes, release = QueueCore("q", QueueSettings()), [], asyncio.Event()
    batcher = AsyncEnqueueBatcher(core, held_first_call(sizes, release))
    given = [None, "old-1", None, "old-2", None]
    tasks = [asyncio.create_task(batcher.enqueue(group(core, n, job_id))) for n, job_id in enumerate(given)]
    while len(sizes) < 2:
        await asyncio.sleep(0)
    release.set()
    jobs = await asyncio.gather(*tasks)
    assert sizes == [1, 4]
    for n, (job, job_id) in enumerate(zip(jobs, given, strict=True)):
        if job_id is None:
            assert job.created and job.state == "waiting" and job.payload == {"n": n}
        else:
            assert (job.id, job.created, job.task, job.payload, job.attempts) == (
                job_id, False, "old-task", "stored", 2)


async def test_callers_that_enqueue_again_join_the_next_call() -> None:
    """N callers in a loop: after the first lone call every call carries all N (sent at once
    instead, calls would alternate between the few that waited and the rest)."""
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []

    async def run(call: Any) -> Any:
        sizes.append(jobs_in(list(call.args)))
        await asyncio.sleep(0)
        return call.parse(fake_reply(list(call.args)))

    batcher = AsyncEnqueueBatcher(core, run)

    async def caller(n: int) -> None:
        for _ in range(5):
            await batcher.enqueue(group(core, n))

    await asyncio.gather(*(caller(n) for n in range(8)))
    assert sizes == [1, 8, 8, 8, 8, 7]
    assert not batcher._slots.flying and not batcher._scheduled


async def test_a_lone_caller_never_waits_for_a_loop_turn() -> None:
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []

    async def run(call: Any) -> Any:
        sizes.append(jobs_in(list(call.args)))
        return call.parse(fake_reply(list(call.args)))

    batcher = AsyncEnqueueBatcher(core, run)
    for n in range(3):
        await batcher.enqueue(group(core, n))
        assert not (batcher._slots.flying or batcher._scheduled)  # idle again: the next goes alone
    assert sizes == [1, 1, 1] and not batcher._tasks


async def test_a_caller_cancelled_while_waiting_is_not_sent() -> None:
    core, sizes, release = QueueCore("q", QueueSettings()), [], asyncio.Event()
    batcher = AsyncEnqueueBatcher(core, held_first_call(sizes, release))
    first = asyncio.create_task(batcher.enqueue(group(core, 0)))
    while not sizes:
        await asyncio.sleep(0)
    tasks = [first, *(asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(1, 4))]
    await asyncio.sleep(0)  # they wait (sent one loop iteration later)
    assert len(batcher._pending) == 3
    tasks[2].cancel()
    release.set()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert sizes == [1, 2]
    assert isinstance(done[2], asyncio.CancelledError)
    assert [done[n].payload for n in (0, 1, 3)] == [{"n": 0}, {"n": 1}, {"n": 3}]


def test_a_batcher_left_busy_by_an_ended_loop_serves_the_next_loop() -> None:
    """An event loop that ended while a call was in flight (its callers cancelled, the next call
    never scheduled) must not leave later callers, on a new loop, waiting forever."""
    core = QueueCore("q", QueueSettings())

    async def run(call: Any) -> Any:
        return call.parse(fake_reply(list(call.args)))

    batcher = AsyncEnqueueBatcher(core, run)

    async def stranded() -> None:
        await batcher.enqueue(group(core, 0))
        batcher._slots.flying = 2  # as if calls were still in flight when the loop ended

    asyncio.run(stranded())
    job = asyncio.run(asyncio.wait_for(batcher.enqueue(group(core, 1)), 5))
    assert job.payload == {"n": 1}


async def test_a_burst_during_a_call_goes_out_as_a_second_call_in_flight() -> None:
    """Callers arriving while a lone call is in flight do not wait for it: they go out together
    as a second call, which may return first (each caller still gets its own job)."""
    core, held = QueueCore("q", QueueSettings()), HeldCalls()
    batcher = AsyncEnqueueBatcher(core, held.run)
    first = asyncio.create_task(batcher.enqueue(group(core, 0)))
    await until(lambda: held.sizes == [1])
    burst = [asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(1, 5)]
    await until(lambda: held.sizes == [1, 4])  # two calls in flight
    held.release[1].set()
    jobs = await asyncio.wait_for(asyncio.gather(*burst), 5)
    assert [job.payload for job in jobs] == [{"n": n} for n in range(1, 5)] and not first.done()
    held.release[0].set()
    assert (await first).payload == {"n": 0}
    assert held.sizes == [1, 4] and not batcher._slots.flying


async def test_fewer_callers_than_the_call_in_flight_wait_for_it() -> None:
    """A second call goes out only with at least as many jobs as the one in flight: fewer wait,
    so the calls stay large (and no third call is sent while two are in flight)."""
    core, held = QueueCore("q", QueueSettings()), HeldCalls()
    batcher = AsyncEnqueueBatcher(core, held.run)
    tasks = [asyncio.create_task(batcher.enqueue(group(core, 0)))]
    await until(lambda: held.sizes == [1])
    tasks += [asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(1, 5)]
    await until(lambda: held.sizes == [1, 4])
    tasks += [asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(5, 8)]
    await until(lambda: len(batcher._pending) == 3)  # two in flight: they wait
    held.release[0].set()
    await until(tasks[0].done)
    for _ in range(20):
        await asyncio.sleep(0)
    assert held.sizes == [1, 4]  # 3 waiting, 4 in flight: they wait for it
    held.release[1].set()
    await until(lambda: held.sizes == [1, 4, 3])
    held.release[2].set()
    jobs = await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert [job.payload for job in jobs] == [{"n": n} for n in range(8)]


async def test_an_error_on_one_call_reaches_only_its_callers() -> None:
    core, held = QueueCore("q", QueueSettings()), HeldCalls()
    held.errors[1] = ConnectionError("lost")
    batcher = AsyncEnqueueBatcher(core, held.run)
    first = asyncio.create_task(batcher.enqueue(group(core, 0)))
    await until(lambda: held.sizes == [1])
    burst = [asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(1, 4)]
    await until(lambda: held.sizes == [1, 3])
    held.release[1].set()
    failed = await asyncio.wait_for(asyncio.gather(*burst, return_exceptions=True), 5)
    assert all(isinstance(f, ConnectionError) for f in failed) and not first.done()
    held.release[0].set()
    assert (await first).payload == {"n": 0}
    held.release[2].set()
    later = await asyncio.wait_for(batcher.enqueue(group(core, 9)), 5)  # the batcher still works
    assert later.payload == {"n": 9} and held.sizes == [1, 3, 1]


def test_threads_share_calls_two_in_flight_completing_out_of_order() -> None:
    """Threads: the second thread finds a call in flight and a slot free (as many waiting as in
    flight) and sends at once; the next ones wait while two are in flight and go out together
    when one returns, here the later one first; an error reaches only its call's threads."""
    core, held = QueueCore("q", QueueSettings()), HeldCalls()
    held.errors[0] = ConnectionError("lost")
    batcher = EnqueueBatcher(core, held.sync)
    results: dict[int, Any] = {}

    def caller(n: int) -> None:
        try:
            results[n] = batcher.enqueue(group(core, n))
        except ConnectionError as exc:
            results[n] = exc

    def start(n: int) -> threading.Thread:
        thread = threading.Thread(target=caller, args=(n,))
        thread.start()
        return thread

    def wait_for(condition: Any) -> None:
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.001)

    threads = [start(0)]
    wait_for(lambda: held.sizes == [1])
    threads.append(start(1))
    wait_for(lambda: held.sizes == [1, 1])  # sent at once: two calls in flight
    threads += [start(2), start(3)]
    wait_for(lambda: len(batcher._pending) == 2)
    held.release[1].set()  # the second call returns first
    wait_for(lambda: held.sizes == [1, 1, 2])
    held.release[2].set()
    wait_for(lambda: len(results) == 3)
    held.release[0].set()
    for thread in threads:
        thread.join(10)
    assert isinstance(results[0], ConnectionError)
    assert [results[n].payload for n in (1, 2, 3)] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert not batcher._slots.flying
