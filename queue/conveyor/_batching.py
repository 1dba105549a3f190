"""Automatic batching of concurrent ``enqueue`` calls (``QueueSettings.batch_enqueue``).

No timer: a caller that finds no enqueue in flight sends its job at once, alone, exactly as
without batching. Callers that arrive while a call is in flight wait; when it returns, everything
that accumulated (up to the script's 1000-job bound) goes out as one script call, and each waiter
gets its own job back. Every caller validates and packs its own job (``QueueCore.pack``) before
it waits, so a bad job fails only its caller; a server or connection error on a shared call
reaches every caller in that call (as it would have reached each of their separate calls).
Idempotent ids behave as in ``enqueue_many``: a repeated id returns the existing job.

Every waiter's job is one ARGV group of the same queue, so a batch is one ``enqueue_packed`` call
whose reply is parsed once, job i going to waiter i.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ._models import Job
from ._ops import MAX_BATCH, Call, QueueCore

Group = tuple[Any, ...]  # one job's validated ARGV group (QueueCore.pack)


def take_batch(pending: list[Any]) -> list[Any]:
    """Remove and return the oldest waiters that fit in one script call."""
    batch = pending[:MAX_BATCH]
    del pending[:MAX_BATCH]
    return batch


class Waiter:
    """One thread's job while it waits to be sent."""

    __slots__ = ("error", "event", "group", "lead", "result")

    def __init__(self, group: Group) -> None:
        self.group = group
        self.result: Job | None = None
        self.error: BaseException | None = None
        self.lead: list[Waiter] | None = None  # the batch this waiter must send
        self.event = threading.Event()


class EnqueueBatcher:
    """Thread-safe batching for the synchronous ``Queue``."""

    def __init__(self, core: QueueCore, run: Callable[[Call[list[Job]]], list[Job]]) -> None:
        self._core, self._run = core, run
        self._lock = threading.Lock()
        self._busy = False
        self._pending: list[Waiter] = []

    def enqueue(self, group: Group) -> Job:
        """Send now when idle, else wait to be part of the next call."""
        with self._lock:
            lone = not self._busy
            if lone:
                self._busy = True
            else:
                waiter = Waiter(group)
                self._pending.append(waiter)
        if lone:
            try:
                return self._run(self._core.enqueue_packed((group,)))[0]
            finally:
                self._next()
        waiter.event.wait()
        if waiter.lead is not None:
            self._send(waiter.lead)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def _next(self) -> None:
        """Hand what accumulated to one of its waiters, or go idle."""
        with self._lock:
            if not self._pending:
                self._busy = False
                return
            batch = take_batch(self._pending)
        batch[0].lead = batch
        batch[0].event.set()

    def _send(self, batch: list[Waiter]) -> None:
        try:
            jobs = self._run(self._core.enqueue_packed([w.group for w in batch]))
        except BaseException as exc:
            for waiter in batch:
                waiter.error = exc
        else:
            for waiter, job in zip(batch, jobs, strict=True):
                waiter.result = job
        finally:
            for waiter in batch[1:]:
                waiter.event.set()
            self._next()


Pending = tuple[Group, "asyncio.Future[Job]"]


class AsyncEnqueueBatcher:
    """Batching for ``AsyncQueue`` (one event loop; no lock needed).

    When a call that carried several callers returns, the next one leaves one loop iteration
    later, not at once: the callers just answered run first, and those that enqueue again (a
    request handler's next job, a producer loop) join it. Sent at once, it would carry only the
    few that waited, and the answered callers would then wait behind it: with N callers the calls
    would alternate between 1 and N-1 jobs, two round trips per N jobs instead of one.
    """

    def __init__(self, core: QueueCore, run: Callable[[Call[list[Job]]], Awaitable[list[Job]]]) -> None:
        self._core, self._run = core, run
        self._busy = False
        self._pending: list[Pending] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def enqueue(self, group: Group) -> Job:
        """Send now when idle, else wait to be part of the next call."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or the loop that used it before has ended
            self._loop, self._busy, self._pending = loop, False, []
        if not self._busy:
            self._busy = True
            try:
                return (await self._run(self._core.enqueue_packed((group,))))[0]
            finally:
                if self._pending:
                    self._done(alone=True)
                else:
                    self._busy = False  # alone: idle again at once, at no cost
        future: asyncio.Future[Job] = loop.create_future()
        self._pending.append((group, future))
        return await future

    def _done(self, alone: bool) -> None:
        """A call returned: a lone caller with nobody waiting leaves the batcher idle at once (no
        cost when alone); otherwise the next call is sent after the answered callers ran."""
        if alone and not self._pending:
            self._busy = False
        else:
            asyncio.get_running_loop().call_soon(self._next)

    def _next(self) -> None:
        """Send what accumulated (skipping callers that were cancelled meanwhile), or go idle."""
        self._pending = [p for p in self._pending if not p[1].done()]
        batch = take_batch(self._pending)
        if not batch:
            self._busy = False
            return
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[Pending]) -> None:
        try:
            jobs = await self._run(self._core.enqueue_packed([group for group, _ in batch]))
        except BaseException as exc:
            for _, future in batch:
                if future.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
        else:
            for (_, future), job in zip(batch, jobs, strict=True):
                if not future.done():
                    future.set_result(job)
        finally:
            self._done(alone=len(batch) == 1)
