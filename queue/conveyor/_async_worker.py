"""AsyncWorker: runs async handlers as tasks; one pump task settles and claims jobs in batches."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._async_client import AsyncQueue
from ._dispatch import (
    RECOVERABLE,
    Dispatcher,
    WorkerOptions,
    failure_of,
    idle_wait,
    log,
    missing_handler,
    validate_handlers,
)
from ._errors import LeaseLostError
from ._models import Job
from ._retry import RECONNECT
from ._topology import ASYNC, role_client

AsyncHandler = Callable[[Job], Awaitable[Any]]


class AsyncWorker:
    """Process jobs of ``queue`` with ``concurrency`` asyncio tasks.

    Connections: three per worker, named in CLIENT LIST as ``conveyor:<queue>:<role>``: ``pump``
    (ack and claim), ``waiter`` (blocks in BZPOPMIN while idle) and ``maint`` (heartbeats,
    promotion, lease recovery, retention). Handler tasks never touch the server.
    """

    def __init__(self, queue: AsyncQueue, handlers: Mapping[str, AsyncHandler], **options: Any) -> None:
        validate_handlers(handlers, want_async=True)
        self.queue, self.handlers = queue, dict(handlers)
        self.options = WorkerOptions(**options)
        self._dispatch = Dispatcher(self.options, queue.settings.lease)
        self._ready: asyncio.Queue[Job] = asyncio.Queue()
        self._wake, self._stop = asyncio.Event(), asyncio.Event()
        self._idle: asyncio.Task[Any] | None = None

    @property
    def stats(self) -> dict[str, int]:
        return self._dispatch.stats()

    def stop(self) -> None:
        """Ask for a graceful shutdown: stop claiming, finish or release in-flight jobs."""
        self._stop.set()
        self._wake.set()
        if self._idle is not None:
            self._idle.cancel()

    def _role(self, role: str) -> AsyncQueue:
        q = self.queue
        client = role_client(ASYNC, q.client, q.name, role, self.options.block_timeout)
        return AsyncQueue(q.name, client, settings=q.settings)

    async def run(self) -> dict[str, int]:
        """Process jobs until stopped (or, with ``burst=True``, until the queue is drained)."""
        pump, waiter, maint = (self._role(r) for r in ("pump", "waiter", "maint"))
        tasks = [asyncio.create_task(self._slot()) for _ in range(self.options.concurrency)]
        tasks.append(asyncio.create_task(self._maintain(maint)))
        self._signals(install=True)
        try:
            await self._pump(pump, waiter)
        finally:
            self._signals(install=False)
            self._stop.set()
            for task in tasks:
                task.cancel()
            # redis-py can swallow a cancellation mid-command; never wait on it without a bound.
            await asyncio.wait(tasks, timeout=5.0)
            for q in (pump, waiter, maint):
                await q.aclose()
        return self.stats

    def _signals(self, install: bool) -> None:
        if not self.options.install_signal_handlers:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                if install:
                    loop.add_signal_handler(sig, self.stop)
                else:
                    loop.remove_signal_handler(sig)

    # -- handler tasks ----------------------------------------------------------------------------
    async def _slot(self) -> None:
        d = self._dispatch
        while True:
            job = await self._ready.get()
            d.started.add(job.id)
            handler = self.handlers.get(job.task)
            try:
                if handler is None:
                    d.failures.append(missing_handler(job))
                else:
                    job.payload  # noqa: B018 - decode before the handler; a bad payload fails the job
                    await handler(job)
                    d.done.append(job)
            except Exception as exc:
                d.failures.append(failure_of(job, exc))
            self._wake.set()

    # -- pump -------------------------------------------------------------------------------------
    async def _pump(self, pump: AsyncQueue, waiter: AsyncQueue) -> None:
        d, attempt, deadline = self._dispatch, 0, float("inf")
        while True:
            if self._stop.is_set() and not d.stopping:
                d.stopping, deadline = True, time.monotonic() + self.options.shutdown_timeout
                await self._release_buffered(pump)
            try:
                claimed, until_due = await self._exchange(pump)
                attempt = 0
            except RECOVERABLE as exc:
                attempt += 1
                log.warning("worker lost the server (%s); retrying", exc)
                await self._sleep(RECONNECT.delay(attempt))
                continue
            if d.stopping and (d.quiet() or time.monotonic() >= deadline):
                await self._release_unsettled(pump)
                return
            if claimed:
                continue
            if d.quiet() and self.options.burst:
                return
            await self._wait(waiter, until_due)

    async def _exchange(self, pump: AsyncQueue) -> tuple[bool, float]:
        """Send failures, then one call that acks finished jobs and claims the free capacity."""
        d = self._dispatch
        for failure in list(d.failures):
            with contextlib.suppress(LeaseLostError):
                await pump._run(pump.core.fail(failure.job, failure.error, failure.retry))
            d.on_failed(failure)
        acks = d.pending_acks()
        budget = d.claim_budget(len(acks))
        if not acks and not budget:
            return False, -1.0
        statuses, claimed, until_due = await pump._run(pump.core.ack(acks, budget))
        d.on_acked(acks, statuses)
        d.on_claimed(claimed)
        for job in claimed:
            self._ready.put_nowait(job)
        return bool(claimed), until_due

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _wait(self, waiter: AsyncQueue, until_due: float) -> None:
        d = self._dispatch
        if d.done or d.failures:
            return
        if d.held:
            await self._sleep(0.5)
            return
        timeout = idle_wait(self.options.block_timeout, until_due)
        self._idle = asyncio.ensure_future(waiter.client.bzpopmin(waiter.core.keys.marker, timeout=timeout))
        try:
            await self._idle
        except asyncio.CancelledError:
            if not self._stop.is_set():
                raise
        except RECOVERABLE as exc:
            # The pump notices a lost server on its next call and backs off; do not spin here.
            log.debug("idle wait interrupted (%s)", exc)
            await self._sleep(RECONNECT.delay(1))
        finally:
            self._idle = None

    async def _release_buffered(self, pump: AsyncQueue) -> None:
        jobs = [self._ready.get_nowait() for _ in range(self._ready.qsize())]
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

    # -- maintenance ------------------------------------------------------------------------------
    async def _maintain(self, maint: AsyncQueue) -> None:
        settings, d = self.queue.settings, self._dispatch
        tick = min(settings.lease / 3, settings.maintenance_interval)
        last_sweep = 0.0
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), tick)
                return
            try:
                jobs = d.needs_heartbeat()
                if jobs:
                    d.on_extended(jobs, await maint._run(maint.core.extend(jobs, None)))
                if time.monotonic() - last_sweep >= settings.maintenance_interval:
                    last_sweep = time.monotonic()
                    await maint.promote()
                    await maint.recover()
                    await maint.trim()
            except RECOVERABLE as exc:
                log.warning("maintenance failed (%s); will retry", exc)
