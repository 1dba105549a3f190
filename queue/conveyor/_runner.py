"""Run an app's workers for several queues in one process, with a graceful stop on SIGTERM/SIGINT.

Several queues are served by one worker per queue inside the process, each with its own pump (one
round trip acks and claims; two pumps for an AsyncWorker from concurrency 8), maintenance
connection and ``concurrency`` handler slots; they share
one waiter, a single blocking wait over all the queues' markers (one per slot on Cluster, see
``_waiter.py``). Fairness rule: queues never share handler slots, so a backlog on one queue cannot
delay another; the order of the queue list does not set a priority (the shared wait rotates it).
Every task and hook sync: thread workers. Any async task or hook: asyncio workers on one event
loop, with sync tasks run in threads. The scheduler, when enabled, runs in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ._app import Conveyor
from ._async_worker import AsyncWorker
from ._daemon_pool import DaemonThreadPool
from ._dispatch import WorkerOptions
from ._scheduler import Scheduler
from ._signals import stop_on_signals
from ._topology import ASYNC, SYNC, Flavour, role_client
from ._waiter import AsyncMarkerWaiter, MarkerWaiter, new_wait_set, wait_groups
from ._worker import Worker

log = logging.getLogger("conveyor.runner")
Stats = dict[str, dict[str, int]]
FORCED_EXIT_CODE = 3
SCHEDULER_EXIT_WAIT = 1.0  # seconds
WorkerT = TypeVar("WorkerT", Worker, AsyncWorker)


def sharing(worker: WorkerT, waiter: Any) -> WorkerT:
    """``worker`` set to use ``waiter``, the one wait shared by the served queues' workers. Not a
    keyword of the workers: no public name builds a waiter, so it stays out of their signatures."""
    worker._waiter = waiter
    return worker


def check_queues(app: Conveyor, queues: list[str]) -> list[str]:
    """The queues to serve, in order, without repeats; each must have registered tasks."""
    known = set(app.queue_names())
    if not queues:
        # An app without tasks is the usual cause (their modules are not imported by the app's):
        # "name at least one" sent the user to -q, where every name is refused.
        why = (
            "name at least one"
            if known
            else "the app has no registered task (is its tasks' module imported?)"
        )
        raise ValueError(f"no queue to serve: {why}")
    unknown = [q for q in queues if q not in known]
    if unknown:
        served = ", ".join(sorted(known)) or "none"
        raise ValueError(f"queue {unknown[0]!r} has no registered task (queues with tasks: {served})")
    return list(dict.fromkeys(queues))


class Runner:
    """Workers for ``queues`` of ``app``; ``run()`` blocks until ``stop()`` or a signal."""

    def __init__(
        self, app: Conveyor, queues: list[str], *, scheduler: bool = False, **worker_options: Any
    ) -> None:
        self.app, self.queues = app, check_queues(app, queues)
        self.worker_options = {**worker_options, "install_signal_handlers": False}
        WorkerOptions(**self.worker_options)  # bad options are refused before anything starts
        self.use_asyncio = app.needs_asyncio(self.queues)
        self.scheduler = Scheduler(app) if scheduler and app.schedules else None
        self._stoppers: list[Callable[[], None]] = []
        self._stopping = threading.Event()
        self.signals = 0
        self._handlers = contextlib.ExitStack()  # see _started

    def stop(self) -> None:
        """Graceful stop: workers stop claiming, finish or release their jobs, then run() returns."""
        self._stopping.set()
        for stop in list(self._stoppers):
            stop()

    def _on_signal(self, signum: int) -> None:
        """Runs in the signal handler; stop() follows from a thread (``_signals.py``)."""
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals > 1:
            # Jobs still leased are redelivered when their lease expires: nothing is lost.
            log.warning("received %s again: exiting without waiting for running jobs", name)
            # os._exit: a task thread still running would otherwise hold up interpreter exit.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # None (its fd closed), a broken pipe: exit anyway
                    stream.flush()
            os._exit(FORCED_EXIT_CODE)
        log.info("received %s: stopping gracefully (again to exit at once)", name)

    def run(self) -> Stats:
        """Serve the queues until stopped; returns each queue's worker stats. SIGTERM and SIGINT
        stop the workers gracefully once each queue's start-up call answered (``_started``)."""
        with self._handlers, self._scheduler_thread():  # the handlers last out, as the scheduler stops
            if self.use_asyncio:
                return asyncio.run(self._run_async())
            return self._run_threads()

    def _started(self) -> None:
        """The start-up calls answered: the Runner's SIGTERM/SIGINT handlers from now until run()
        returns. During those calls the caller's apply (the CLI's: exit 0 at once); installed
        before them, a signal only asked the workers, not started yet, to stop, and a server that
        did not answer held the command for socket_timeout, then it exited 1."""
        self._handlers.enter_context(stop_on_signals(self.stop, self._on_signal))

    @contextlib.contextmanager
    def _scheduler_thread(self) -> Iterator[None]:
        scheduler = self.scheduler
        if scheduler is None:
            yield
            return
        thread = threading.Thread(target=scheduler.run, name="conveyor-scheduler", daemon=True)
        self._stoppers.append(scheduler.stop)
        thread.start()
        try:
            yield
        finally:
            scheduler.stop()
            # Briefly: a fire call is atomic on the server and the thread is a daemon, so leaving
            # one stuck in a server call (writes paused in a failover) loses nothing, where waiting
            # for its socket timeout held the exit past any shutdown timeout.
            thread.join(timeout=SCHEDULER_EXIT_WAIT)

    def _waiters(self, flavour: Flavour, queues: list[Any], kind: type[Any]) -> list[Any]:
        """One shared waiter per wait group (all queues on one server), in the order of ``queues``;
        each named after the first queue of its group: ``conveyor:<queue>:waiter``."""
        block = WorkerOptions(**self.worker_options).block_timeout
        markers = [q.core.keys.marker for q in queues]
        out: list[Any] = [None] * len(queues)
        for group in wait_groups(queues[0].client, markers):
            first = queues[group[0]]
            client = role_client(flavour, first.client, first.name, "waiter", block)
            waiter = kind(client, new_wait_set(first.core.keys.wake, block))
            for index in group:
                out[index] = waiter
        return out

    def _run_threads(self) -> Stats:
        queues = [self.app.queue(q) for q in self.queues]
        for queue in queues:
            queue.counts()  # see _run_async
        self._started()
        waiters = self._waiters(SYNC, queues, MarkerWaiter)
        try:
            return self._serve_threads(queues, waiters)
        finally:
            for waiter in dict.fromkeys(waiters):
                waiter.close()

    def _serve_threads(self, queues: list[Any], waiters: list[MarkerWaiter]) -> Stats:
        workers = {
            q.name: sharing(Worker(q, self.app.handlers(q.name), **self.worker_options), w)
            for q, w in zip(queues, waiters, strict=True)
        }
        stats: Stats = {}
        errors: list[BaseException] = []

        def serve(queue: str, worker: Worker) -> None:
            try:
                stats[queue] = worker.run()
            except BaseException as exc:
                errors.append(exc)
                self.stop()

        self._stoppers += [w.stop for w in workers.values()]
        if self._stopping.is_set():
            self.stop()
        threads = [
            threading.Thread(target=serve, args=item, name=f"conveyor-worker-{item[0]}", daemon=True)
            for item in workers.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.5)
        if errors:
            raise errors[0]
        return stats

    async def _run_async(self) -> Stats:
        queues = [self.app.async_queue(q) for q in self.queues]
        try:
            # One call per queue before any worker starts: a server that cannot be reached (or
            # refuses the queue's layout) fails the run at once; a running worker instead
            # outlives a server restart, retrying with backoff.
            for queue in queues:
                await queue.counts()
        except BaseException:
            await self.app.aclose()
            raise
        self._started()
        waiters = self._waiters(ASYNC, queues, AsyncMarkerWaiter)
        try:
            return await self._serve_async(queues, waiters)
        finally:
            for waiter in dict.fromkeys(waiters):
                await waiter.aclose()
            await self.app.aclose()

    async def _serve_async(self, queues: list[Any], waiters: list[AsyncMarkerWaiter]) -> Stats:
        workers = {
            q.name: sharing(AsyncWorker(q, self.app.async_handlers(q.name), **self.worker_options), w)
            for q, w in zip(queues, waiters, strict=True)
        }
        loop = asyncio.get_running_loop()
        # Sync tasks run in the default executor: a thread for every call (the stock executor
        # has min(32, CPUs + 4) threads, fewer than -c on small machines, and a thread past its
        # time limit holds one while its slot serves the next job), daemon threads so that one
        # still running past the deadline does not hold up the exit (see _daemon_pool.py).
        loop.set_default_executor(DaemonThreadPool(thread_name_prefix="conveyor-task"))

        def stop_all() -> None:
            for worker in workers.values():
                worker.stop()

        def stop_from_any_thread() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: run() returned already
                loop.call_soon_threadsafe(stop_all)

        self._stoppers.append(stop_from_any_thread)
        if self._stopping.is_set():
            self.stop()
        runs = [asyncio.create_task(w.run()) for w in workers.values()]
        try:
            results = await asyncio.gather(*runs)
        except BaseException:
            stop_all()
            # Each worker's own shutdown timeout bounds its stop, as in _serve_threads: a fixed
            # bound here cancelled the others' jobs past it, whatever --shutdown-timeout said.
            await asyncio.wait(runs)
            raise
        return dict(zip(workers, results, strict=True))
