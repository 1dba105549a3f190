"""Automatic batching of concurrent ``enqueue`` calls (``QueueSettings.batch_enqueue``).

No timer: a caller that finds no enqueue in flight sends its job at once, alone, exactly as
without batching. Callers that arrive while a call is in flight wait; when it returns, everything
that accumulated (up to the script's 1000-job bound) goes out as one script call, sent by one of
the waiters, and each waiter gets its own job back. Every caller validates and encodes its own job
before it waits, so a bad job fails only its caller; a server or connection error on a shared call
reaches every caller in that call (as it would have reached each of their separate calls).
Idempotent ids behave as in ``enqueue_many``: a repeated id returns the existing job.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ._models import Job, JobSpec
from ._ops import MAX_BATCH, Call, QueueCore

JOB_FIELDS = 8  # ARGV per job in enqueue.lua (QueueCore._pack)


class Waiter:
    """One caller's job(s) while it waits to be sent."""

    __slots__ = ("call", "error", "event", "future", "lead", "result", "specs")

    def __init__(self, specs: list[JobSpec], call: Call[list[Job]]) -> None:
        self.specs, self.call = specs, call
        self.result: list[Job] | None = None
        self.error: BaseException | None = None
        self.lead: list[Waiter] | None = None  # sync: the batch this waiter must send
        self.event: threading.Event | None = None
        self.future: asyncio.Future[list[Job]] | None = None


def take_batch(pending: list[Waiter]) -> list[Waiter]:
    """Remove and return the oldest waiters whose jobs fit in one script call."""
    size = count = 0
    for waiter in pending:
        if size + len(waiter.specs) > MAX_BATCH:
            break
        size += len(waiter.specs)
        count += 1
    batch = pending[:count]
    del pending[:count]
    return batch


def split_reply(reply: Any, sizes: list[int]) -> list[list[Any]]:
    """Cut one enqueue reply into the replies each waiter's own call would have received.

    Layout (see enqueue.lua): now, then (id, created, state) per job, then 5 fields per job that
    already existed, in job order.
    """
    now, extra, start = reply[0], 1 + 3 * sum(sizes), 1
    parts = []
    for size in sizes:
        triples = list(reply[start : start + 3 * size])
        existing = 5 * sum(1 for i in range(size) if not triples[3 * i + 1])
        parts.append([now, *triples, *reply[extra : extra + existing]])
        start, extra = start + 3 * size, extra + existing
    return parts


def merged_call(batch: list[Waiter]) -> Call[list[list[Job]]]:
    """One enqueue call for every waiter's already packed jobs; each parses its own part."""
    first = batch[0].call
    if len(batch) == 1:
        return Call(first.script, first.keys, first.args, lambda r: [first.parse(r)])
    sizes = [len(w.specs) for w in batch]
    # ARGV: n, the queue-wide arguments (the same for every waiter), then JOB_FIELDS per job.
    shared = len(first.args) - JOB_FIELDS * sizes[0]
    args: list[Any] = [sum(sizes), *first.args[1:shared]]
    for waiter in batch:
        args += waiter.call.args[shared:]

    def parse(reply: Any) -> list[list[Job]]:
        parts = split_reply(reply, sizes)
        return [w.call.parse(part) for w, part in zip(batch, parts, strict=True)]

    return Call(first.script, first.keys, args, parse)


class EnqueueBatcher:
    """Thread-safe batching for the synchronous ``Queue``."""

    def __init__(self, core: QueueCore, run: Callable[[Call[Any]], Any]) -> None:
        self._core, self._run = core, run
        self._lock = threading.Lock()
        self._busy = False
        self._pending: list[Waiter] = []

    def enqueue(self, specs: list[JobSpec]) -> list[Job]:
        """Send now when idle, else wait to be part of the next call."""
        call = self._core.enqueue(specs)  # validates: a bad job raises here, to its caller only
        with self._lock:
            lone = not self._busy
            if lone:
                self._busy = True
            else:
                waiter = Waiter(specs, call)
                waiter.event = event = threading.Event()
                self._pending.append(waiter)
        if lone:
            try:
                jobs: list[Job] = self._run(call)
                return jobs
            finally:
                self._next()
        event.wait()
        if waiter.lead is not None:
            self._send(waiter.lead)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def _next(self) -> None:
        """Hand what accumulated to one of its waiters, or go idle."""
        with self._lock:
            batch = take_batch(self._pending)
            if not batch:
                self._busy = False
                return
        batch[0].lead = batch
        assert batch[0].event is not None
        batch[0].event.set()

    def _send(self, batch: list[Waiter]) -> None:
        try:
            results = self._run(merged_call(batch))
        except BaseException as exc:
            for waiter in batch:
                waiter.error = exc
        else:
            for waiter, jobs in zip(batch, results, strict=True):
                waiter.result = jobs
        finally:
            for waiter in batch[1:]:
                assert waiter.event is not None
                waiter.event.set()
            self._next()


class AsyncEnqueueBatcher:
    """Batching for ``AsyncQueue`` (one event loop; no lock needed)."""

    def __init__(self, core: QueueCore, run: Callable[[Call[Any]], Awaitable[Any]]) -> None:
        self._core, self._run = core, run
        self._busy = False
        self._pending: list[Waiter] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def enqueue(self, specs: list[JobSpec]) -> list[Job]:
        """Send now when idle, else wait to be part of the next call."""
        call = self._core.enqueue(specs)  # validates: a bad job raises here, to its caller only
        if not self._busy:
            self._busy = True
            try:
                jobs: list[Job] = await self._run(call)
                return jobs
            finally:
                self._next()
        waiter = Waiter(specs, call)
        waiter.future = asyncio.get_running_loop().create_future()
        self._pending.append(waiter)
        return await waiter.future

    def _next(self) -> None:
        """Send what accumulated (skipping callers that were cancelled meanwhile), or go idle."""
        self._pending = [w for w in self._pending if w.future is None or not w.future.done()]
        batch = take_batch(self._pending)
        if not batch:
            self._busy = False
            return
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[Waiter]) -> None:
        try:
            results = await self._run(merged_call(batch))
        except BaseException as exc:
            for waiter in batch:
                if waiter.future is None or waiter.future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    waiter.future.cancel()
                else:
                    waiter.future.set_exception(exc)
        else:
            for waiter, jobs in zip(batch, results, strict=True):
                if waiter.future is not None and not waiter.future.done():
                    waiter.future.set_result(jobs)
        finally:
            self._next()
