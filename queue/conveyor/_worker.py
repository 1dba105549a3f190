"""Worker: runs handlers in threads; one pump thread settles and claims jobs in batches."""

from __future__ import annotations

import contextlib
import queue as stdlib_queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._client import Queue
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
from ._topology import SYNC, node_of, role_client

Handler = Callable[[Job], Any]


class Worker:
    """Process jobs of ``queue`` with ``concurrency`` threads.

    Connections: three per worker, named in CLIENT LIST as ``conveyor:<queue>:<role>``: ``pump``
    (ack and claim), ``waiter`` (blocks in BZPOPMIN while idle) and ``maint`` (heartbeats,
    promotion, lease recovery, retention). Handler threads never touch the server.
    """

    def __init__(self, queue: Queue, handlers: Mapping[str, Handler], **options: Any) -> None:
        validate_handlers(handlers, want_async=False)
        self.queue, self.handlers = queue, dict(handlers)
        self.options = WorkerOptions(**options)
        self._dispatch = Dispatcher(self.options, queue.settings.lease)
        self._ready: stdlib_queue.SimpleQueue[Job | None] = stdlib_queue.SimpleQueue()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._waiter_id: int | None = None

    @property
    def stats(self) -> dict[str, int]:
        return self._dispatch.stats()

    def stop(self) -> None:
        """Ask for a graceful shutdown: stop claiming, finish or release in-flight jobs."""
        self._stop.set()
        self._wake.set()
        if self._waiter_id is not None:
            # The pump may be blocked in BZPOPMIN for up to block_timeout: end the block now.
            threading.Thread(target=self._unblock_waiter, args=(self._waiter_id,), daemon=True).start()

    def _unblock_waiter(self, client_id: int) -> None:
        client, marker = self.queue.client, self.queue.core.keys.marker
        with contextlib.suppress(*RECOVERABLE):
            client.client_unblock(client_id, **node_of(client, marker))

    def _role(self, role: str) -> Queue:
        q = self.queue
        client = role_client(SYNC, q.client, q.name, role, self.options.block_timeout)
        return Queue(q.name, client, settings=q.settings)

    def run(self) -> dict[str, int]:
        """Process jobs until stopped (or, with ``burst=True``, until the queue is drained)."""
        pump, waiter, maint = (self._role(r) for r in ("pump", "waiter", "maint"))
        with contextlib.suppress(*RECOVERABLE):
            self._waiter_id = int(waiter.client.client_id(**node_of(waiter.client, waiter.core.keys.marker)))
        threads = [
            threading.Thread(target=self._slot, daemon=True, name=f"conveyor-slot-{i}")
            for i in range(self.options.concurrency)
        ]
        threads.append(threading.Thread(target=self._maintain, args=(maint,), daemon=True))
        with self._signals():
            for thread in threads:
                thread.start()
            try:
                self._pump(pump, waiter)
            finally:
                self._stop.set()
                for _ in range(self.options.concurrency):
                    self._ready.put(None)
                for q in (pump, waiter, maint):
                    q.close()
        return self.stats

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        if (
            not self.options.install_signal_handlers
            or threading.current_thread() is not threading.main_thread()
        ):
            yield
            return
        previous = {
            sig: signal.signal(sig, lambda *_: self.stop()) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- handler threads --------------------------------------------------------------------------
    def _slot(self) -> None:
        while (job := self._ready.get()) is not None:
            self._dispatch.started.add(job.id)
            handler = self.handlers.get(job.task)
            try:
                if handler is None:
                    failure = missing_handler(job)
                else:
                    job.payload  # noqa: B018 - decode before the handler; a bad payload fails the job
                    handler(job)
                    failure = None
            except Exception as exc:
                failure = failure_of(job, exc)
            with self._lock:
                (self._dispatch.failures.append(failure) if failure else self._dispatch.done.append(job))
            self._wake.set()

    # -- pump -------------------------------------------------------------------------------------
    def _pump(self, pump: Queue, waiter: Queue) -> None:
        d, attempt, deadline = self._dispatch, 0, float("inf")
        while True:
            if self._stop.is_set() and not d.stopping:
                d.stopping, deadline = True, time.monotonic() + self.options.shutdown_timeout
                self._release_buffered(pump)
            try:
                claimed, until_due = self._exchange(pump)
                attempt = 0
            except RECOVERABLE as exc:
                attempt += 1
                log.warning("worker lost the server (%s); retrying", exc)
                self._wake.wait(RECONNECT.delay(attempt))
                self._wake.clear()
                continue
            if d.stopping and (d.quiet() or time.monotonic() >= deadline):
                self._release_unsettled(pump)
                return
            if claimed:
                continue
            if d.quiet() and self.options.burst:
                return
            self._wait(waiter, until_due)

    def _exchange(self, pump: Queue) -> tuple[bool, float]:
        """Send failures, then one call that acks finished jobs and claims the free capacity."""
        d = self._dispatch
        for failure in list(d.failures):
            with contextlib.suppress(LeaseLostError):
                pump._run(pump.core.fail(failure.job, failure.error, failure.retry))
            d.on_failed(failure)
        acks = d.pending_acks()
        budget = d.claim_budget(len(acks))
        if not acks and not budget:
            return False, -1.0
        statuses, claimed, until_due = pump._run(pump.core.ack(acks, budget))
        with self._lock:
            d.on_acked(acks, statuses)
            d.on_claimed(claimed)
        for job in claimed:
            self._ready.put(job)
        return bool(claimed), until_due

    def _wait(self, waiter: Queue, until_due: float) -> None:
        d = self._dispatch
        if d.done or d.failures:
            return
        if d.held:
            self._wake.wait(0.5)
            self._wake.clear()
            return
        timeout = idle_wait(self.options.block_timeout, until_due)
        try:
            waiter.client.bzpopmin(waiter.core.keys.marker, timeout=timeout)
        except RECOVERABLE as exc:
            # The pump notices a lost server on its next call and backs off; do not spin here.
            log.debug("idle wait interrupted (%s)", exc)
            self._wake.wait(RECONNECT.delay(1))

    def _release_buffered(self, pump: Queue) -> None:
        jobs: list[Job] = []
        with contextlib.suppress(stdlib_queue.Empty):
            while True:
                job = self._ready.get_nowait()
                if job is not None:
                    jobs.append(job)
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                pump.release(jobs, started=False)
            self._dispatch.on_released(jobs)

    def _release_unsettled(self, pump: Queue) -> None:
        jobs, started = self._dispatch.unsettled()
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                pump._run(pump.core.release(jobs, started))
            self._dispatch.on_released(jobs)

    # -- maintenance ------------------------------------------------------------------------------
    def _maintain(self, maint: Queue) -> None:
        settings, d = self.queue.settings, self._dispatch
        tick = min(settings.lease / 3, settings.maintenance_interval)
        last_sweep = 0.0
        while not self._stop.wait(tick):
            try:
                jobs = d.needs_heartbeat()
                if jobs:
                    d.on_extended(jobs, maint._run(maint.core.extend(jobs, None)))
                if time.monotonic() - last_sweep >= settings.maintenance_interval:
                    last_sweep = time.monotonic()
                    maint.promote()
                    maint.recover()
                    maint.trim()
            except RECOVERABLE as exc:
                log.warning("maintenance failed (%s); will retry", exc)
