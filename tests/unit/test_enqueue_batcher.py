"""Enqueue batching without a server: who waits, what one call carries, cancelled callers."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

from conveyor import JobSpec, QueueSettings
from conveyor._batching import AsyncEnqueueBatcher, EnqueueBatcher, split_reply
from conveyor._ops import QueueCore

_ids = itertools.count(1)


def fake_reply(args: list[Any]) -> list[Any]:
    """What enqueue.lua returns when every job is new."""
    reply: list[Any] = [1_000]
    for _ in range(args[0]):
        reply += [str(next(_ids)).encode(), 1, b"w"]
    return reply


def spec(n: int) -> list[JobSpec]:
    return [JobSpec("t", {"n": n})]


def test_split_reply_gives_each_caller_its_triples_and_existing_fields() -> None:
    reply = [7, b"1", 1, b"w", b"x", 0, b"a", b"2", 1, b"w", b"y", 0, b"d", *range(5), *range(5, 10)]
    assert split_reply(reply, [2, 1, 1]) == [
        [7, b"1", 1, b"w", b"x", 0, b"a", 0, 1, 2, 3, 4],
        [7, b"2", 1, b"w"],
        [7, b"y", 0, b"d", 5, 6, 7, 8, 9],
    ]


def test_threads_arriving_during_a_call_share_the_next_one() -> None:
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []
    release = threading.Event()

    def run(call: Any) -> Any:
        sizes.append(call.args[0])
        if len(sizes) == 1:
            release.wait(10)
        return call.parse(fake_reply(list(call.args)))

    batcher = EnqueueBatcher(core, run)
    results: dict[int, Any] = {}

    def caller(n: int) -> None:
        results[n] = batcher.enqueue(spec(n))[0]

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
    core = QueueCore("q", QueueSettings())
    sizes: list[int] = []
    release = asyncio.Event()

    async def run(call: Any) -> Any:
        sizes.append(call.args[0])
        if len(sizes) == 1:
            await release.wait()
        return call.parse(fake_reply(list(call.args)))

    batcher = AsyncEnqueueBatcher(core, run)
    tasks = [asyncio.create_task(batcher.enqueue(spec(n))) for n in range(4)]
    while len(batcher._pending) < 3:
        await asyncio.sleep(0)
    tasks[2].cancel()
    release.set()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert sizes == [1, 2]
    assert isinstance(done[2], asyncio.CancelledError)
    assert [done[n][0].payload for n in (0, 1, 3)] == [{"n": 0}, {"n": 1}, {"n": 3}]
