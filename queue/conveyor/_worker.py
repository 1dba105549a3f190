"""Worker: runs handlers in threads; one pump thread settles and claims jobs in batches."""

from __future__ import annotations

import contextlib
import queue as stdlib_queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._client import Queue
from ._dispatch import Dispatcher, WorkerOptions, check_first_run, idle_wait, validate_handlers
from ._errors import LeaseLostError
from ._models import Job
from ._outcomes import Failure, fail_call, failure_of, missing_handler, settle_return
from ._replies import TIMEOUT
from ._retry import RECONNECT
from ._signals import stop_on_signals
from ._sweeps import hold_call
from ._topology import SYNC, role_client
from ._waiter import MarkerWaiter, new_wait_set
from ._worker_errors import RECOVERABLE, log, report_maintenance_error, report_pump_error, stops_worker

Handler = Callable[[Job], Any]

# How long a stopping worker waits for its maintenance and watcher threads to notice the stop
# (each ends within one call); bounded so a lost server cannot hold up the exit.
HELPER_JOIN_TIMEOUT = 2.0


class Worker:
    """Process jobs of ``queue`` with ``concurrency`` threads.

    Options (keywords): ``concurrency`` handler threads (default 1); ``prefetch`` jobs leased
    beyond them to hide round trips (default 0); ``burst`` to return once no job is ready or
    running; ``shutdown_timeout`` (30 s, below); ``block_timeout``, the longest idle wait on the
    server (2 s); ``install_signal_handlers`` (default True: SIGTERM and SIGINT stop the worker
    while ``run()`` runs in the main thread; False leaves the program's own handlers alone).

    Connections: three per worker, named in CLIENT LIST as ``conveyor:<queue>:<role>``: ``pump``
    (ack and claim), ``waiter`` (blocks in BZPOPMIN for wake-ups) and ``maint`` (heartbeats,
    promotion, lease recovery, retention). Handler threads never touch the server. The workers
    of ``conveyor worker -q a,b,c`` share one ``waiter``; a worker built here opens its own.

    Shutdown: ``stop()`` (or SIGTERM/SIGINT) stops claiming; heartbeats go on while running jobs
    finish, for up to ``shutdown_timeout`` seconds, even while the server is unreachable. At the
    deadline, jobs that never started are released; a handler thread that still runs cannot be
    interrupted, so its job is not released (another worker would run it at the same time): its
    lease is left to expire and the job is redelivered after ``lease`` seconds.

    Time limits and cancellation: a thread cannot be interrupted. When a job's time limit passes
    (checked every maintenance tick, at most ``min(lease / 3, maintenance_interval)``) or a cancel
    of it arrives with a heartbeat, the worker sets ``job.cancelled`` (``current_job().cancelled``
    in a task), stops renewing the lease and settles the job at once: cancelled, or timed out.
    A timed-out job whose thread still runs is failed, not retried (a retry would run it twice at
    once); a prefetched job whose limit passes before a slot started it is given back to the
    queue, its attempt not counted. The thread keeps its slot
    until it returns (no new job is claimed for it) and whatever it returns or raises is dropped.
    """

    def __init__(
        self,
        queue: Queue,
        handlers: Mapping[str, Handler],
        **options: Any,
    ) -> None:
        validate_handlers(handlers, want_async=False)
        self.queue, self.handlers = queue, dict(handlers)
        self._waiter: MarkerWaiter | None = None  # one shared by several queues' workers (_runner)
        self.options = WorkerOptions(**options)
        self._dispatch = Dispatcher(self.options, queue.settings.lease)
        self._ready: stdlib_queue.SimpleQueue[Job | None] = stdlib_queue.SimpleQueue()
        self._wake, self._stop, self._finished = threading.Event(), threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._ran = False

    @property
    def stats(self) -> dict[str, int]:
        """Counts of this worker so far: ``processed`` jobs it completed (acknowledged), ``failed``
        attempts it recorded as failed (retried or failed for good), and ``held``, the slots in use
        (jobs leased, and handlers still running after their job was settled)."""
        return self._dispatch.stats()

    def stop(self) -> None:
        """Ask for a graceful shutdown: stop claiming, finish or release in-flight jobs."""
        self._dispatch.stop_asked = min(self._dispatch.stop_asked, time.monotonic())
        self._stop.set()
        self._wake.set()

    def _role(self, role: str) -> Queue:
        q = self.queue
        client = role_client(SYNC, q.client, q.name, role, self.options.block_timeout)
        return Queue(q.name, client, settings=q.settings)

    def run(self) -> dict[str, int]:
        """Process jobs until stopped (or, with ``burst=True``, until no job is ready or running:
        delayed jobs, retries waiting out their backoff too, stay for a later worker). A worker
        runs once: a second call raises RuntimeError. Returns its final [stats][conveyor.Worker.stats]:
        ``processed``, ``failed`` and ``held``. A lost server is retried with backoff; a queue of
        another data layout ends the run with [SchemaVersionError][conveyor.SchemaVersionError],
        which no retry can fix."""
        check_first_run(self)
        pump, maint = self._role("pump"), self._role("maint")
        waiter = self._waiter or self._own_waiter()
        threads = [
            threading.Thread(target=self._slot, daemon=True, name=f"conveyor-slot-{i}")
            for i in range(self.options.concurrency)
        ]
        threads.append(threading.Thread(target=self._maintain, args=(maint,), daemon=True))
        marker = self.queue.core.keys.marker
        with self._signals():
            for thread in threads:
                thread.start()
            waiter.watch(marker, self._dispatch.wants_marker, self._wake.set)
            try:
                self._pump(pump, waiter)
            finally:
                self._stop.set()
                self._finished.set()
                waiter.unwatch(marker)
                for _ in range(self.options.concurrency):
                    self._ready.put(None)
                if waiter is not self._waiter:
                    waiter.close()
                self._close_roles((pump, maint), threads[-1:])
        return self.stats

    def _own_waiter(self) -> MarkerWaiter:
        q = self.queue
        client = role_client(SYNC, q.client, q.name, "waiter", self.options.block_timeout)
        return MarkerWaiter(client, new_wait_set(q.core.keys.wake, self.options.block_timeout))

    def _close_roles(self, roles: tuple[Queue, ...], helpers: list[threading.Thread]) -> None:
        """Close the role connections, then again once the maintenance thread ended: a thread in
        the middle of a call (a heartbeat) can still open a fresh connection from a closed pool,
        so wait for it briefly and close once more: a stopped worker leaves no connection behind.
        """
        for _ in range(2):
            for q in roles:
                with contextlib.suppress(Exception):
                    q.close()
            for thread in helpers:
                thread.join(HELPER_JOIN_TIMEOUT)

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        if not self.options.install_signal_handlers:
            yield
            return
        with stop_on_signals(self.stop):
            yield

    # -- handler threads --------------------------------------------------------------------------
    def _slot(self) -> None:
        d = self._dispatch
        while (job := self._ready.get()) is not None:
            with self._lock:  # run() ended (on an error it does not retry): no pump would ack
                # the job, no heartbeat renew its lease; it is left to lease recovery unstarted
                refused = job.stop_reason is not None or self._finished.is_set() or not d.on_started(job)
            if refused:  # stopped before it started (already settled), or given back (its limit
                self._wake.set()  # passed in the buffer: the pump sends it back now)
                continue
            handler, result = self.handlers.get(job.task), None
            failure: Failure | None
            try:
                if handler is None:
                    failure = missing_handler(job)
                else:
                    job.payload  # noqa: B018 - decode before the handler; a bad payload fails the job
                    failure, result = settle_return(self.queue.settings, job, handler(job))
            except BaseException as exc:  # sys.exit() or a library's BaseException ends the attempt,
                failure = failure_of(job, exc)  # not the slot (which would leave the job active)
            with self._lock:
                d.on_finished(job, failure, result)
            self._wake.set()

    # -- pump -------------------------------------------------------------------------------------
    def _pump(self, pump: Queue, waiter: MarkerWaiter) -> None:
        d, attempt, deadline = self._dispatch, 0, float("inf")
        while True:
            if self._stop.is_set() and not d.stopping:
                # from the stop, not from now: a call in flight (a server not answering) delays this
                d.stopping, deadline = True, d.stop_asked + self.options.shutdown_timeout
                self._release_buffered(pump)
            try:
                claimed, until_due = self._exchange(pump)
                attempt = 0
            except Exception as exc:
                if stops_worker(exc, self.queue.name, d.held):
                    raise
                attempt += 1
                report_pump_error(exc)
                if time.monotonic() >= d.stop_asked + self.options.shutdown_timeout:
                    return  # unreachable at the deadline: the leases expire and are redelivered
                self._sleep(RECONNECT.delay(attempt), deadline)
                continue
            if d.stopping and (d.quiet() or time.monotonic() >= deadline):
                with self._lock:
                    d.settle_returned(self.queue.settings)
                self._settle_last(pump)
                self._release_unsettled(pump)
                return
            if claimed:
                if d.stopping:  # a re-sent call's batch, claimed before the stop: given back
                    self._release_buffered(pump)
                continue
            if d.quiet() and self.options.burst and until_due != 0 and not d.holds.held:  # 0: jobs ready
                return
            self._wait(pump, waiter, until_due, deadline)

    def _exchange(self, pump: Queue) -> tuple[bool, float]:
        """Give back expired jobs, send failures, then one call that acks finished jobs and claims
        the free capacity."""
        d = self._dispatch
        if d.expired:
            with self._lock:
                expired = list(d.expired)
            statuses = pump._run(pump.core.release(expired, [False] * len(expired)))
            with self._lock:
                d.on_expired_released(expired, statuses)
        for failure in list(d.failures):
            accepted = True
            try:
                pump._run(fail_call(pump.core, failure))
            except LeaseLostError:
                accepted = False
            with self._lock:
                d.on_failed(failure, accepted)
        with self._lock:
            acks = d.pending_acks()
            results = d.ack_results(acks)
        budget = d.claim_budget(len(acks))
        if not acks and not budget and not d.resending:
            return False, -1.0
        request, resend = d.on_sending(acks)
        call = pump.core.ack(acks, budget, request=request, resend=resend, results=results)
        statuses, claimed, until_due = pump._run(call)
        with self._lock:
            d.on_acked(acks, statuses)
            d.on_claimed(claimed)
        for job in claimed:
            self._ready.put(job)
        return bool(claimed), until_due

    def _sleep(self, seconds: float, deadline: float) -> None:
        self._wake.wait(max(0.0, min(seconds, deadline - time.monotonic())))
        self._wake.clear()

    def _wait(self, pump: Queue, waiter: MarkerWaiter, until_due: float, deadline: float) -> None:
        """Sleep until a handler finishes, a wake-up arrives (while a slot is free) or a delayed
        job is due. The waiter's thread blocks on the marker, so a free slot is filled at once
        even while other slots are busy."""
        d = self._dispatch
        if d.done or d.failures:
            return
        if d.wants_marker() and waiter.ask(pump.core.keys.marker):
            with contextlib.suppress(*RECOVERABLE):  # else the wait in progress ends at its timeout
                waiter.set.wake_pipeline(pump.client).execute()
        self._sleep(idle_wait(self.options.block_timeout, until_due), deadline)

    def _release_buffered(self, pump: Queue) -> None:
        jobs: list[Job] = []
        with contextlib.suppress(stdlib_queue.Empty):
            while True:
                job = self._ready.get_nowait()
                if job is not None:
                    jobs.append(job)
        with self._lock:
            jobs = self._dispatch.releasable(jobs)
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                pump.release(jobs, started=False)
            with self._lock:
                self._dispatch.on_released(jobs)

    def _settle_last(self, pump: Queue) -> None:
        """At the deadline, send the acks and failures of handlers that finished while the last
        call was in flight: left unsent, a job completed before the deadline would run again once
        its lease expired. Budget 0 (stopping): these calls claim nothing."""
        while self._dispatch.done or self._dispatch.failures or self._dispatch.expired:
            try:
                self._exchange(pump)
            except Exception as exc:  # unreachable: their leases expire, as documented
                report_pump_error(exc)
                return

    def _release_unsettled(self, pump: Queue) -> None:
        with self._lock:
            jobs, started = self._dispatch.unsettled()
        if jobs:
            with contextlib.suppress(*RECOVERABLE):
                pump._run(pump.core.release(jobs, started))
            with self._lock:
                self._dispatch.on_released(jobs)
        if self._dispatch.running:
            log.warning(
                "%d handler(s) still running at the shutdown deadline; their leases are left to expire",
                len(self._dispatch.running),
            )

    def _stop_jobs(self, stops: list[tuple[Job, str]]) -> None:
        """Settle jobs to stop (lock held); their threads cannot be interrupted, only told."""
        for job, reason in stops:
            if reason == TIMEOUT and job._returned:  # its after hooks run: the limit bounds the task,
                continue  # and a task that returned completed (never retried nor failed for it)
            if self._dispatch.stop(job, reason):
                self._dispatch.abandon(job)
        if stops:
            self._wake.set()

    # -- maintenance ------------------------------------------------------------------------------
    def _maintain(self, maint: Queue) -> None:
        """Heartbeats and sweeps until run() ends (not at stop(): a graceful shutdown still holds
        the leases of the jobs it is finishing)."""
        settings, d = self.queue.settings, self._dispatch
        tick = min(settings.lease / 3, settings.maintenance_interval)
        last_sweep = 0.0
        asleep, traced = time.monotonic(), set[str]()
        while not self._finished.wait(tick):
            woke = time.monotonic()
            try:
                with self._lock:
                    d.woke_late(woke - asleep, tick)
                    jobs = d.needs_heartbeat(tick)
                    self._stop_jobs([(job, TIMEOUT) for job in d.overdue()])
                if jobs:
                    statuses = maint._run(maint.core.extend(jobs, None))
                    with self._lock:
                        self._stop_jobs(d.on_extended(jobs, statuses))
                with self._lock:
                    renew, end = d.holds.plan(tick, d.runs_on)
                if renew or end:
                    statuses = maint._run(hold_call(maint.core, renew, end))
                    with self._lock:
                        d.holds.on_answered(renew, end, statuses)
                if time.monotonic() - last_sweep >= settings.maintenance_interval:
                    last_sweep = time.monotonic()
                    maint.promote()
                    maint.recover()
                    maint.trim()
            except Exception as exc:
                if self._finished.is_set():
                    return
                report_maintenance_error(exc, traced)
            asleep = time.monotonic()
