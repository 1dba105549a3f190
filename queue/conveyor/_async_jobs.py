"""What an AsyncWorker does with the jobs it holds: runs each one's handler in a slot task, stops
it (time limit, cancel, shutdown deadline), and renews the leases of running jobs (heartbeats).

The worker class (``_async_worker.py``) holds the run, its lanes and the pump that acks and claims
jobs; this part never claims a job, and its slot tasks never touch the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

from ._async_client import AsyncQueue
from ._dispatch import Dispatcher
from ._handoff import Handoff
from ._hooks import AsyncHandler, thread_runs_on
from ._models import Job
from ._outcomes import failure_of, missing_handler, settle_return, stopped
from ._replies import TIMEOUT, held_token
from ._sweeps import hold_call
from ._worker_errors import report_maintenance_error


class AsyncJobs:
    """The job-holding side of [AsyncWorker][conveyor.AsyncWorker] (its base class)."""

    # Set by AsyncWorker.__init__ (and run(): the loop).
    queue: AsyncQueue
    handlers: Mapping[str, AsyncHandler]
    _dispatch: Dispatcher
    _ready: Handoff[Job]
    _wake: asyncio.Event
    _finished: asyncio.Event
    _slots: list[asyncio.Task[None]]
    _running: dict[str, asyncio.Task[Any]]  # lease token -> the slot running it
    _loop: asyncio.AbstractEventLoop | None

    # -- handler tasks ----------------------------------------------------------------------------
    async def _slot(self) -> None:
        d, me, loop = self._dispatch, asyncio.current_task(), asyncio.get_running_loop()
        assert me is not None
        while True:
            job = await self._ready.get()
            if job.stop_reason is not None or not d.on_started(job):
                self._wake.set()  # stopped before it started (already settled), or given back
                continue  # (its limit passed in the buffer: the pump sends it back now)
            token = held_token(job)
            self._running[token] = me
            timer = loop.call_at(d.deadlines[token], self._stop_job, job, TIMEOUT) if job.time_limit else None
            handler = self.handlers.get(job.task)
            failure, result = None, None
            try:
                if handler is None:
                    failure = missing_handler(job)
                else:
                    job.payload  # noqa: B018 - decode before the handler; a bad payload fails the job
                    failure, result = settle_return(self.queue.settings, job, await handler(job))
            except Exception as exc:
                failure = failure_of(job, exc)
            except asyncio.CancelledError as exc:
                if job.stop_reason is None and not me.cancelling():  # raised by the handler itself
                    failure = failure_of(job, exc)
                else:
                    threaded = thread_runs_on(handler, job)
                    if job.stop_reason is None or me.uncancel() > 0:  # the worker is ending
                        if timer is not None:  # else it fires on the caller's loop, job gone
                            timer.cancel()
                        if not threaded:  # cancelled at the deadline: released as started
                            d.running.discard(token)  # (a thread's lease is left to expire)
                        del self._running[token]
                        raise
                    failure = stopped(job, job.stop_reason, still_running=threaded)
            except BaseException as exc:  # sys.exit(), KeyboardInterrupt or a library's own: the
                failure = failure_of(job, exc)  # attempt's failure, never the end of the slot or loop
            if job.stop_reason is not None:
                self._after_stop(me, timer)
                # Settled as stopped whatever the handler did once asked to stop: a handler that
                # swallowed its CancelledError and returned was acked as completed (a cancelled
                # job ended completed, a time limit was not enforced); one that raised something
                # else got that error and its retry rule (see Job.cancelled: it is discarded).
                # A task that returned stands as completed: its limit only cut its after hooks.
                if not (job._returned and job.stop_reason == TIMEOUT):
                    failure, result = stopped(job, job.stop_reason, thread_runs_on(handler, job)), None
            elif timer is not None:
                timer.cancel()
            del self._running[token]
            d.on_finished(job, failure, result)
            self._wake.set()
            if me.cancelling():  # its task returned at the shutdown deadline (its after hooks cut):
                raise asyncio.CancelledError  # the worker is ending, this slot with it

    @staticmethod
    def _after_stop(me: asyncio.Task[Any], timer: asyncio.TimerHandle | None) -> None:
        """A handler that swallowed its cancellation leaves the request counted: drop it."""
        if timer is not None:
            timer.cancel()
        if me.cancelling():
            me.uncancel()

    def _stop_job(self, job: Job, reason: str) -> None:
        """Cancel the handler of a job to stop; a job not started yet is settled by the pump."""
        if self._dispatch.stop(job, reason):
            slot = self._running.get(held_token(job))
            if slot is None:  # a thread its slot left running at the shutdown deadline: nothing
                return  # to interrupt, its lease is left to expire (lease recovery settles it)
            slot.cancel()
            if self._loop is not None:
                self._loop.call_later(self.queue.settings.lease / 3, self._abandon_if_running, job)
        self._wake.set()

    def _abandon_if_running(self, job: Job) -> None:
        """A handler that swallowed its cancellation and still runs a third of a lease later is
        settled now, as a thread that cannot be interrupted is (whatever it returns later is
        dropped). Timed out: failed, not retried, since its lease is not renewed (extend.lua) and
        lease recovery would run it again beside it. Cancelled: it ends cancelled, as cancel()
        said, instead of staying active (its waiters waiting) for as long as it runs."""
        token = job.token  # None once its fail was sent (the usual case): nothing left to do
        if token is not None and token in self._running and token in self._dispatch.running:
            self._dispatch.abandon(job)
            self._wake.set()

    async def _cancel_slots(self) -> None:
        """Cancel handlers still running at the deadline; their jobs are then released."""
        if not self._dispatch.running:
            return
        for task in self._slots:
            task.cancel()
        await asyncio.wait(self._slots, timeout=1.0)

    # -- heartbeats -------------------------------------------------------------------------------
    async def _maintain(self, maint: AsyncQueue) -> None:
        """Heartbeats and sweeps until run() ends (not at stop(): a graceful shutdown still holds
        the leases of the jobs it is finishing)."""
        settings, d = self.queue.settings, self._dispatch
        tick = min(settings.lease / 3, settings.maintenance_interval)
        last_sweep, traced = 0.0, set[str]()
        while not self._finished.is_set():
            asleep = time.monotonic()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._finished.wait(), tick)
                return
            d.woke_late(time.monotonic() - asleep, tick)
            try:
                for job in d.overdue():  # not started yet (running ones have a timer)
                    self._stop_job(job, TIMEOUT)
                jobs = d.needs_heartbeat(tick)
                if jobs:
                    for job, reason in d.on_extended(jobs, await maint._run(maint.core.extend(jobs, None))):
                        self._stop_job(job, reason)
                renew, end = d.holds.plan(tick, d.runs_on)
                if renew or end:
                    d.holds.on_answered(renew, end, await maint._run(hold_call(maint.core, renew, end)))
                if time.monotonic() - last_sweep >= settings.maintenance_interval:
                    last_sweep = time.monotonic()
                    await maint.promote()
                    await maint.recover()
                    await maint.trim()
            except Exception as exc:  # any error: ending this task would end the heartbeats
                report_maintenance_error(exc, traced)
