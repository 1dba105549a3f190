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
    """What enqueue.lua returns: a job whose given id starts with "old" already exists."""
    reply: list[Any] = [1_000]
    existing: list[Any] = []
    for i in range(jobs_in(args)):
        given = args[1 + 5 * i]
        if given.startswith("old"):
            reply += [given.encode(), 0, b"a"]
            existing += [b"old-task", b'"stored"', 2, 5, 900]
        else:
            reply += [str(next(_ids)).encode(), 1, b"w"]
    return reply + existing


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
    while len(batcher._pending) < 4:
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
    assert not batcher._busy


async def test_a_lone_caller_never_waits_for_a_loop_turn() -> None:
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []

    async def run(call: Any) -> Any:
        sizes.append(jobs_in(list(call.args)))
        return call.parse(fake_reply(list(call.args)))

    batcher = AsyncEnqueueBatcher(core, run)
    for n in range(3):
        await batcher.enqueue(group(core, n))
        assert not batcher._busy  # idle again at once: the next call goes out alone, directly
    assert sizes == [1, 1, 1] and not batcher._tasks


def test_threads_arriving_during_a_call_share_the_next_one() -> None:
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []
    release = threading.Event()

    def run(call: Any) -> Any:
        sizes.append(jobs_in(list(call.args)))
        if len(sizes) == 1:
            release.wait(10)
        return call.parse(fake_reply(list(call.args)))

    batcher = EnqueueBatcher(core, run)
    results: dict[int, Any] = {}

    def caller(n: int) -> None:
        results[n] = batcher.enqueue(group(core, n))

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    threads[0].start()
    while not sizes:
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()
    while len(batcher._pending) < 3:
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    assert sizes == [1, 3]
    assert len({job.id for job in results.values()}) == 4
    assert all(results[n].payload == {"n": n} for n in range(4))


async def test_a_caller_cancelled_while_waiting_is_not_sent() -> None:
    core, sizes, release = QueueCore("q", QueueSettings()), [], asyncio.Event()
    batcher = AsyncEnqueueBatcher(core, held_first_call(sizes, release))
    tasks = [asyncio.create_task(batcher.enqueue(group(core, n))) for n in range(4)]
    while len(batcher._pending) < 3:
        await asyncio.sleep(0)
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
        batcher._busy = True  # as if a call were still in flight when the loop ended

    asyncio.run(stranded())
    job = asyncio.run(asyncio.wait_for(batcher.enqueue(group(core, 1)), 5))
    assert job.payload == {"n": 1}
