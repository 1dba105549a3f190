"""Automatic batching of concurrent ``enqueue`` calls (``QueueSettings.batch_enqueue``).

No timer: a caller that finds no enqueue in flight sends its job at once, alone, exactly as
without batching. Callers that arrive while a call is in flight wait; when it returns, everything
that accumulated (up to the script's 1000-job bound) goes out as one script call, and each waiter
gets its own job back. A second call goes out while the first is in flight, on another pooled
connection, once at least as many callers wait as the first carries: a burst does not wait a
round trip, but the calls stay large. (Splitting the callers into two half-size calls in flight,
so that the client packs one while the server runs the other, made the client CPU-bound case
slower: a script call costs the asyncio client about as much as 8 jobs, and halving the calls
doubles that share; measured with callgrind and in the enqueue-single bench.)

Every caller validates and packs its own job (``QueueCore.pack``) before it waits, so a bad job
fails only its caller; a server or connection error (or a timeout) on a call reaches every caller
in that call and no other (as it would have reached each of their separate calls). A thread
interrupted (Ctrl-C) while it waits leaves: its job is not sent if it was still waiting, and a call
it was chosen to send goes to the next caller in it; interrupted while sending, it raises its
interrupt, and the other callers of that call a ConnectionFailedError (applied or not: unknown).
Idempotent ids behave as in ``enqueue_many``: a repeated id returns the existing job. Two calls
in flight may be run by the server in either order; concurrent callers have no order among
themselves anyway.

Every waiter's job is one ARGV group of the same queue, so a batch is one ``enqueue_packed`` call
whose reply is parsed once, job i going to waiter i.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from ._errors import ConnectionFailedError
from ._models import Job
from ._ops import MAX_BATCH, Call, QueueCore

Group = tuple[Any, ...]  # one job's validated ARGV group (QueueCore.pack)
IN_FLIGHT = 2  # script calls in flight at once (fewer when the pool has fewer connections)


class Slots:
    """Calls in flight and the jobs they carry; decides when the waiting callers go out."""

    __slots__ = ("flying", "jobs", "limit")

    def __init__(self, limit: int) -> None:
        self.limit, self.flying, self.jobs = limit, 0, 0

    def take(self, pending: list[Any]) -> list[Any]:
        """The waiters to send now (oldest first, removed from ``pending``; the call counted in
        flight), or nothing: they wait for a call in flight to return."""
        waiting = len(pending)
        if not waiting or (self.flying and (self.flying >= self.limit or waiting < self.jobs)):
            return []
        batch = pending[:MAX_BATCH]
        del pending[:MAX_BATCH]
        self.flying += 1
        self.jobs += len(batch)
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
    """Thread-safe batching for the synchronous ``Queue``: the first waiter of a batch sends it."""

    def __init__(self, core: QueueCore, run: Callable[[Call[list[Job]]], list[Job]],
                 in_flight: int = IN_FLIGHT) -> None:  # fmt: skip
        self._core, self._run, self._limit = core, run, in_flight
        self._after_fork()
        reset_in_children(self)

    def _after_fork(self) -> None:
        """Idle, nobody waiting: also in a forked child, whose copy of the parent's calls in flight
        (and of its lock, maybe held) no thread of the child would ever finish."""
        self._lock = threading.Lock()
        self._slots = Slots(self._limit)
        self._pending: list[Waiter] = []

    def enqueue(self, group: Group) -> Job:
        """Send now when idle, else wait to be part of a later call."""
        slots = self._slots
        with self._lock:
            lone = not slots.flying
            if lone:
                slots.flying, slots.jobs = 1, 1
            else:
                waiter = Waiter(group)
                self._pending.append(waiter)
                self._hand(slots.take(self._pending))
        if lone:
            try:
                return self._run(self._core.enqueue_packed((group,)))[0]
            finally:
                self._next(1)
        try:
            waiter.event.wait()
            if waiter.lead is not None:
                self._send(waiter.lead)
        except BaseException:  # Ctrl-C (in the main thread): this caller leaves, the others stay served
            self._leave(waiter)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    @staticmethod
    def _hand(batch: list[Waiter]) -> None:
        """Wake the first waiter of ``batch`` to send it (may be the caller itself)."""
        if batch:
            batch[0].lead = batch
            batch[0].event.set()

    def _next(self, done: int) -> None:
        """A call of ``done`` jobs returned: send those waiting, if they should go now."""
        slots = self._slots
        with self._lock:
            slots.flying -= 1
            slots.jobs -= done
            if not self._pending:  # the lone caller's path: nothing more to do
                return
            # handed under the lock: a waiter leaving (_leave) sees it taken and handed at once
            self._hand(slots.take(self._pending))

    def _leave(self, waiter: Waiter) -> None:
        """``waiter``'s caller was interrupted while waiting: a job still waiting is never sent;
        a batch it was to send goes to the next waiter in it (or is given up when it was alone).
        A job already in a call in flight keeps that call's fate (its caller cannot know it)."""
        with self._lock:
            if waiter in self._pending:
                self._pending.remove(waiter)
                return
            batch, waiter.lead = waiter.lead, None
            if batch is None:
                return
            if len(batch) > 1:
                self._slots.jobs -= 1
                self._hand(batch[1:])
                return
        self._next(1)  # its call was never made

    def _send(self, batch: list[Waiter]) -> None:
        try:
            batch[0].lead = None  # sent from here on: an interrupt is this call's (see _leave)
            jobs = self._run(self._core.enqueue_packed([w.group for w in batch]))
        except BaseException as exc:
            # An interrupt (Ctrl-C) belongs to the sending thread: the others only lost their reply.
            other = exc if isinstance(exc, Exception) else interrupted(exc)
            for waiter in batch:
                waiter.error = exc if waiter is batch[0] else other
        else:
            for waiter, job in zip(batch, jobs, strict=True):
                waiter.result = job
        finally:
            for waiter in batch[1:]:
                waiter.event.set()
            self._next(len(batch))


def interrupted(exc: BaseException) -> ConnectionFailedError:
    """What the other callers of a batch get when the thread sending it was interrupted."""
    return ConnectionFailedError(
        f"the script call carrying this job was interrupted in another thread ({type(exc).__name__}) "
        "before its reply: it may have been applied or not (an enqueue with a job_id is safe to repeat)"
    )


_IN_CHILDREN: weakref.WeakSet[Any] = weakref.WeakSet()  # reset in a forked child


def reset_in_children(state: Any) -> None:
    """Call ``state._after_fork()`` in every child forked while ``state`` lives (its threads,
    locks and calls in flight stay in the parent)."""
    _IN_CHILDREN.add(state)


def _reset_after_fork() -> None:
    for state in list(_IN_CHILDREN):
        state._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


Pending = tuple[Group, "asyncio.Future[Job]"]
AsyncRun = Callable[[Call[list[Job]]], Awaitable[list[Job]]]


class AsyncEnqueueBatcher:
    """Batching for ``AsyncQueue`` (one event loop; no lock needed).

    Waiting callers go out one loop iteration after they may (not at once): callers arriving in
    the same iteration join them. When a call that carried several callers returns, the callers
    just answered run first, and those that enqueue again (a request handler's next job, a
    producer loop) join the next call. Sent at once, it would carry only the first of them, and
    with N callers the calls would alternate between 1 and N-1 jobs.
    """

    def __init__(self, core: QueueCore, run: AsyncRun, in_flight: int = IN_FLIGHT) -> None:
        self._core, self._run, self._limit = core, run, in_flight
        self._slots = Slots(in_flight)
        self._scheduled = False
        self._pending: list[Pending] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def enqueue(self, group: Group) -> Job:
        """Send now when idle, else wait to be part of a later call."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or the loop that used it before has ended
            self._loop, self._pending, self._slots, self._scheduled = loop, [], Slots(self._limit), False
        slots = self._slots
        if not (slots.flying or self._scheduled):  # idle (anyone waiting is in flight or due)
            slots.flying, slots.jobs = 1, 1
            try:
                return (await self._run(self._core.enqueue_packed((group,))))[0]
            finally:
                self._done(1)
        future: asyncio.Future[Job] = loop.create_future()
        self._pending.append((group, future))
        if slots.flying < slots.limit and len(self._pending) >= slots.jobs:
            self._schedule()
        return await future

    def _done(self, jobs: int) -> None:
        """A call of ``jobs`` jobs returned. If it carried several, its callers that enqueue
        again in this iteration join those waiting; a lone call with nobody waiting leaves the
        batcher idle at once (no cost when alone)."""
        slots = self._slots
        slots.flying -= 1
        slots.jobs -= jobs
        if self._pending or jobs > 1:
            self._schedule()

    def _schedule(self) -> None:
        """Send the waiting callers one loop iteration from now (after the callers ready to run)."""
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._next)

    def _next(self) -> None:
        """Send what accumulated (skipping callers cancelled meanwhile), if it should go now."""
        self._scheduled = False
        self._pending = [p for p in self._pending if not p[1].done()]
        while batch := self._slots.take(self._pending):
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
            self._done(len(batch))
