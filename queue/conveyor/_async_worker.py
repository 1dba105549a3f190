"""AsyncWorker: runs async handlers as tasks; one pump task settles and claims jobs in batches.

This module holds the run, its lanes and the pump; running, stopping and heartbeating the jobs
held is its base class's part (``_async_jobs.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping
from typing import Any

from ._async_client import AsyncQueue
from ._async_jobs import AsyncJobs
from ._dispatch import Dispatcher, WorkerOptions, check_first_run, idle_wait, validate_handlers
from ._errors import LeaseLostError
from ._handoff import Handoff
from ._hooks import AsyncHandler
from ._lanes import pump_count, split
from ._models import Job
from ._outcomes import fail_call
from ._retry import RECONNECT
from ._topology import ASYNC, role_client
from ._waiter import AsyncMarkerWaiter, new_wait_set
from ._worker_errors import RECOVERABLE, report_pump_error, stops_worker


class AsyncWorker(AsyncJobs):
    """Process jobs of ``queue`` with ``concurrency`` asyncio tasks.

    Options (keywords), as for a thread [Worker][conveyor.Worker]: ``concurrency`` handler
    tasks (default 1), ``prefetch`` (default 0), ``burst``, ``shutdown_timeout`` (30 s),
    ``block_timeout`` (2 s) and ``install_signal_handlers`` (default True: SIGTERM and SIGINT
    stop the worker while its event loop runs in the main thread; False leaves the program's own).

    Connections: named in CLIENT LIST as ``conveyor:<queue>:<role>``: ``pump`` (ack and claim),
    ``waiter`` (blocks in BZPOPMIN for wake-ups) and ``maint`` (heartbeats, promotion, lease
    recovery, retention); three per worker with one pump, five with two. Handler tasks never touch
    the server.

    Pumps (``pumps``, default: two from concurrency 8 on, else one): each pump is a lane with its
    own ``pump`` and ``maint`` connections and an even share of the slots and prefetch, like two
    workers in one process sharing the waiter; one lane's call is in flight while the other's
    handlers run (see ``_lanes.py`` for the measured gain). ``pumps=1`` keeps three connections.

    The workers of ``conveyor worker -q a,b,c`` share one ``waiter``; a worker built here opens
    its own.

    Shutdown: ``stop()`` (or SIGTERM/SIGINT) stops claiming; heartbeats go on while running jobs
    finish, for up to ``shutdown_timeout`` seconds, even while the server is unreachable. At the
    deadline, handlers still running are cancelled and their jobs released (the attempt counts; a
    job on its last attempt ends failed instead, as lease recovery would end it), except a sync
    task of an app still running in its thread: it cannot be stopped, so its job is not released
    (another worker would run it beside the thread); its lease is left to expire.

    Time limits and cancellation: a handler still running when its job's time limit passes, or
    when a cancel of it arrives with a heartbeat (within a third of the lease), is cancelled
    (``CancelledError`` at its current ``await``) and the job settled: retried or failed as timed
    out, or cancelled. A handler that swallows its time limit's cancellation and still runs a
    third of a lease later is failed, not retried (its lease is no longer renewed, so recovery
    would start a second attempt beside it); one that swallows a cancel's ends cancelled then. A
    sync task of an app, run in a thread (``asyncio.to_thread``), is not interrupted: its slot is
    freed, the thread runs on with its outcome dropped, and a timed-out attempt of it is failed,
    not retried (a retry would run it twice at once).
    """

    def __init__(
        self,
        queue: AsyncQueue,
        handlers: Mapping[str, AsyncHandler],
        *,
        pumps: int | None = None,
        **options: Any,
    ) -> None:
        validate_handlers(handlers, want_async=True)
        self.queue, self.handlers = queue, dict(handlers)
        self._waiter: AsyncMarkerWaiter | None = None  # one shared by several queues' workers (_runner)
        self.options = WorkerOptions(**options)
        self._lanes = self._new_lanes(pump_count(pumps, self.options.concurrency), options)
        self._in_lane = False  # a lane leaves watching the marker to the worker it belongs to
        self._dispatch = Dispatcher(self.options, queue.settings.lease)
        self._ready: Handoff[Job] = Handoff()
        self._wake, self._stop, self._finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self._slots: list[asyncio.Task[None]] = []
        self._running: dict[str, asyncio.Task[Any]] = {}  # lease token -> the slot running it
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop run() runs on (for stop())
        self._ran = False
        self._previous_signals: dict[int, Any] = {}  # handlers the run's own ones replaced

    def _new_lanes(self, pumps: int, options: dict[str, Any]) -> list[AsyncWorker]:
        """The lanes of a worker with several pumps (none with one): same class and handlers,
        an even share of the slots and prefetch, no signal handlers of their own."""
        if pumps == 1:
            return []
        shares = zip(split(self.options.concurrency, pumps), split(self.options.prefetch, pumps), strict=True)
        lanes = []
        for concurrency, prefetch in shares:
            lane = object.__new__(type(self))  # a subclass's overrides apply, its __init__ is not rerun
            own = {
                **options,
                "concurrency": concurrency,
                "prefetch": prefetch,
                "install_signal_handlers": False,
            }
            AsyncWorker.__init__(lane, self.queue, self.handlers, pumps=1, **own)
            lane._in_lane = True
            lanes.append(lane)
        return lanes

    @property
    def stats(self) -> dict[str, int]:
        """Counts of this worker so far: ``processed`` jobs it completed (acknowledged), ``failed``
        attempts it recorded as failed (retried or failed for good), and ``held``, the slots in use
        (jobs leased, and handlers still running after their job was settled)."""
        if not self._lanes:
            return self._dispatch.stats()
        each = [lane.stats for lane in self._lanes]
        return {key: sum(s[key] for s in each) for key in each[0]}

    def stop(self) -> None:
        """Ask for a graceful shutdown: stop claiming, finish or release in-flight jobs. Safe to
        call from any thread (a worker run in one thread, stopped from another)."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and not _on_loop(loop):
            loop.call_soon_threadsafe(self._stop_here)  # asyncio events belong to their loop's thread
        else:
            self._stop_here()

    def _stop_here(self) -> None:
        self._dispatch.stop_asked = min(self._dispatch.stop_asked, time.monotonic())
        self._stop.set()
        self._wake.set()
        for lane in self._lanes:
            lane._stop_here()

    def _role(self, role: str) -> AsyncQueue:
        q = self.queue
        client = role_client(ASYNC, q.client, q.name, role, self.options.block_timeout)
        return AsyncQueue(q.name, client, settings=q.settings)

    async def run(self) -> dict[str, int]:
        """Process jobs until stopped (or, with ``burst=True``, until no job is ready or running:
        delayed jobs, retries waiting out their backoff too, stay for a later worker). A worker
        runs once: a second call raises RuntimeError. Returns its final [stats][conveyor.AsyncWorker.stats]:
        ``processed``, ``failed`` and ``held``. A lost server is retried with backoff; a queue of
        another data layout ends the run with [SchemaVersionError][conveyor.SchemaVersionError],
        which no retry can fix."""
        check_first_run(self)
        self._loop = asyncio.get_running_loop()
        if self._lanes:
            return await self._run_lanes()
        pump, maint = self._role("pump"), self._role("maint")
        pump._hold_connection()  # only the pump task uses it, one call at a time
        waiter = self._waiter or self._own_waiter()
        self._slots = [asyncio.create_task(self._slot()) for _ in range(self.options.concurrency)]
        maintenance = asyncio.create_task(self._maintain(maint))
        marker = self.queue.core.keys.marker
        if not self._in_lane:
            waiter.watch(marker, self._dispatch.wants_marker, self._wake.set)
        self._signals(install=True)
        try:
            await self._pump(pump, waiter)
        finally:
            self._signals(install=False)
            self._stop.set()
            self._finished.set()
            if not self._in_lane:
                waiter.unwatch(marker)
            tasks: list[asyncio.Future[Any]] = [*self._slots, maintenance]
            for task in tasks:
                if task is not maintenance:  # it ends on its own after its current call
                    task.cancel()
            # redis-py can swallow a cancellation mid-command; never wait on it without a bound.
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            for task in pending:
                task.cancel()
            if waiter is not self._waiter:
                await waiter.aclose()
            for q in (pump, maint):
                with contextlib.suppress(Exception):
                    await q.aclose()
        return self.stats

    async def _run_lanes(self) -> dict[str, int]:
        """Run the lanes over one waiter. A lane that fails stops the others, gracefully."""
        waiter = self._waiter or self._own_waiter()
        for lane in self._lanes:
            lane._waiter = waiter
        marker = self.queue.core.keys.marker
        waiter.watch(marker, self._lanes_want_marker, self._wake_lanes)
        self._signals(install=True)
        tasks = [asyncio.create_task(lane.run()) for lane in self._lanes]
        try:
            await asyncio.gather(*tasks)
        finally:
            self._signals(install=False)
            self.stop()  # a no-op for lanes that ended on their own
            await asyncio.wait(tasks)
            waiter.unwatch(marker)
            if waiter is not self._waiter:
                await waiter.aclose()
        return self.stats

    def _lanes_want_marker(self) -> bool:
        return any(lane._wants_marker() for lane in self._lanes)

    def _wants_marker(self) -> bool:
        """A lane that ended (burst: nothing left for it when it looked) claims nothing more: its
        free slots must not draw the wake-ups the lanes still running need."""
        return not self._finished.is_set() and self._dispatch.wants_marker()

    def _wake_lanes(self) -> None:
        """Wake ONE lane, the one with the most free slots: waking all would send an empty claim
        from every other lane per wake-up. While work remains, the claim script wakes the marker
        again, and the next wake-up goes to a lane that still has room. (A burst lane that ended
        drew them all before: a job enqueued meanwhile waited for a running lane's block timeout
        or its busy handlers, with its slots free.)"""
        free = [lane for lane in self._lanes if lane._wants_marker()]
        if free:
            max(free, key=lambda lane: lane.options.capacity - lane._dispatch.held)._wake.set()

    def _own_waiter(self) -> AsyncMarkerWaiter:
        q = self.queue
        client = role_client(ASYNC, q.client, q.name, "waiter", self.options.block_timeout)
        return AsyncMarkerWaiter(client, new_wait_set(q.core.keys.wake, self.options.block_timeout))

    def _signals(self, install: bool) -> None:
        """Install (or remove) the loop's SIGTERM/SIGINT handlers. Removing one resets the signal
        to its default, so the handler the program had before (a web server's graceful shutdown)
        is put back, as the sync Worker does."""
        if not self.options.install_signal_handlers:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                if install:
                    self._previous_signals[sig] = signal.getsignal(sig)
                    loop.add_signal_handler(sig, self.stop)
                elif loop.remove_signal_handler(sig) and self._previous_signals.get(sig) is not None:
                    signal.signal(sig, self._previous_signals.pop(sig))  # None: set from C, unknown

    # -- pump -------------------------------------------------------------------------------------
    async def _pump(self, pump: AsyncQueue, waiter: AsyncMarkerWaiter) -> None:
        d, attempt, deadline = self._dispatch, 0, float("inf")
        while True:
            if self._stop.is_set() and not d.stopping:
                d.stopping, deadline = True, d.stop_asked + self.options.shutdown_timeout  # see Worker
                await self._release_buffered(pump)
            try:
                claimed, until_due = await self._exchange(pump)
                attempt = 0
            except Exception as exc:
                if stops_worker(exc, self.queue.name, d.held):
                    raise
                attempt += 1
                report_pump_error(exc)
                if time.monotonic() >= d.stop_asked + self.options.shutdown_timeout:
                    await self._cancel_slots()
                    return  # unreachable at the deadline: the leases expire and are redelivered
                await self._sleep(RECONNECT.delay(attempt), deadline)
                continue
            if d.stopping and (d.quiet() or time.monotonic() >= deadline):
                await self._cancel_slots()
                await self._settle_last(pump)
                await self._release_unsettled(pump)
                return
            if claimed:
                if d.stopping:  # a re-sent call's batch, claimed before the stop: given back
                    await self._release_buffered(pump)
                continue
            if d.quiet() and self.options.burst and until_due != 0 and not d.holds.held:  # 0: jobs ready
                return
            await self._wait(pump, waiter, until_due, deadline)

    async def _exchange(self, pump: AsyncQueue) -> tuple[bool, float]:
        """Give back expired jobs, send failures, then one call that acks finished jobs and claims
        the free capacity."""
        d = self._dispatch
        if d.expired:
            expired = list(d.expired)
            statuses = await pump._run(pump.core.release(expired, [False] * len(expired)))
            d.on_expired_released(expired, statuses)
        for failure in list(d.failures):
            accepted = True
            try:
                await pump._run(fail_call(pump.core, failure))
            except LeaseLostError:
                accepted = False
            d.on_failed(failure, accepted)
        acks = d.pending_acks()
        budget = d.claim_budget(len(acks))
        if not acks and not budget and not d.resending:
            return False, -1.0
        request, resend = d.on_sending(acks)
        call = pump.core.ack(acks, budget, request=request, resend=resend, results=d.ack_results(acks))
        statuses, claimed, until_due = await pump._run(call)
        d.on_acked(acks, statuses)
        d.on_claimed(claimed)
        for job in claimed:
            self._ready.put(job)
        return bool(claimed), until_due

    async def _sleep(self, seconds: float, deadline: float) -> bool:
        """Wait for a wake-up; False when none came in time. (asyncio.timeout, not wait_for: on
        Python 3.11 wait_for wraps the wait in a task of its own, and the pump sleeps once per
        batch, until its handlers finish.)"""
        woke = True
        if not self._wake.is_set():
            try:
                async with asyncio.timeout(max(0.0, min(seconds, deadline - time.monotonic()))):
                    await self._wake.wait()
            except TimeoutError:
                woke = False
        self._wake.clear()
        return woke

    async def _wait(
        self, pump: AsyncQueue, waiter: AsyncMarkerWaiter, until_due: float, deadline: float
    ) -> None:
        """Sleep until a handler finishes, a wake-up arrives (while a slot is free) or a delayed
        job is due. The waiter's task blocks on the marker, so a free slot is filled at once even
        while other slots are busy."""
        d = self._dispatch
        if d.done or d.failures:
            return
        if d.wants_marker():
            await pump._put_back()  # the wait may be long, and the pipeline takes the pool's connection
            if waiter.ask(pump.core.keys.marker):
                with contextlib.suppress(*RECOVERABLE):  # else the wait in progress ends at its timeout
                    await waiter.set.wake_pipeline(pump.client).execute()
        if not await self._sleep(idle_wait(self.options.block_timeout, until_due), deadline):
            await pump._put_back()  # a quiet while: the server may close a connection left idle

    async def _settle_last(self, pump: AsyncQueue) -> None:
        """At the deadline, send the acks and failures of handlers that finished while the last
        call was in flight (or that returned when cancelled): left unsent, a job completed before
        the deadline would run again once its lease expired. Budget 0 (stopping): no claims."""
        while self._dispatch.done or self._dispatch.failures or self._dispatch.expired:
            try:
                await self._exchange(pump)
            except Exception as exc:  # unreachable: their leases expire, as documented
                report_pump_error(exc)
                return

    async def _release_buffered(self, pump: AsyncQueue) -> None:
        jobs = self._dispatch.releasable(self._ready.take_all())
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                await pump.release(jobs, started=False)
            self._dispatch.on_released(jobs)

    async def _release_unsettled(self, pump: AsyncQueue) -> None:
        jobs, started = self._dispatch.unsettled()
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                await pump._run(pump.core.release(jobs, started))
            self._dispatch.on_released(jobs)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs on ``loop``'s thread (inside one of its callbacks or tasks)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
