"""Hooks around every handler call, and the handlers a worker runs for registered tasks.

Order (like nested middleware): ``before`` hooks run in registration order, then the task; ``after``,
``on_retry`` and ``on_failure`` hooks run in reverse registration order. ``on_retry`` runs when the
failed attempt will be retried, ``on_failure`` when the job fails for good. An attempt the worker
stopped is a failure too: past its time limit the hooks get a ``TimeoutError`` (``on_failure`` when a
thread still ran it, since it is then not retried); cancelled while running, ``on_failure`` gets an
``asyncio.CancelledError``. A limit or the worker's shutdown deadline passing during the ``after``
hooks of a task that returned leaves its success standing (async ``after`` hooks still running are
cancelled, and the app's hooks after them skipped, not the metrics' and tracing's: _run_uncut); a
cancel() learnt then is ignored (the hooks run on). A ``before`` hook that raises
fails the attempt like the task would (the task is not called, the failure hooks run); an exception
in any other hook is logged and ignored (the job's outcome is already decided). Without hooks the
handler is the bare call, after one check per call (hooks may be added once workers are built).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._errors import SerializationError
from ._models import Job, QueueSettings
from ._outcomes import stopped
from ._replies import CANCEL, TIMEOUT
from ._results import PreparedResult, prepare_result
from ._tasks import Task, unpack_arguments

log = logging.getLogger("conveyor.hooks")
Hook = Callable[..., Any]
H = TypeVar("H", bound=Hook)
SyncHandler = Callable[[Job], Any]
AsyncHandler = Callable[[Job], Awaitable[Any]]
_CURRENT_JOB: contextvars.ContextVar[Job] = contextvars.ContextVar("conveyor_current_job")
# An executor thread takes a sync task's call, or the worker takes a stopped call for never run:
# one or the other, never both (see _in_a_thread).
_TAKING = threading.Lock()


def current_job() -> Job:
    """The job whose task is running in this thread or asyncio task (inside a task only).

    A sync task cannot be interrupted: check ``current_job().cancelled`` between steps and return
    early once it is True (the job was cancelled or ran past its time limit).
    """
    try:
        return _CURRENT_JOB.get()
    except LookupError:
        raise LookupError(
            "current_job() is only available while a task of a Conveyor app runs (a handler given "
            "to Worker or AsyncWorker directly gets its job as its argument)"
        ) from None


def will_retry(job: Job, exc: BaseException) -> bool:
    """Whether the worker will schedule another attempt after this exception."""
    return job.attempts < job.max_attempts and not isinstance(exc, SerializationError)


@dataclass
class Hooks:
    """Hooks registered on an app, by kind."""

    before: list[Hook] = field(default_factory=list)
    after: list[Hook] = field(default_factory=list)
    on_retry: list[Hook] = field(default_factory=list)
    on_failure: list[Hook] = field(default_factory=list)
    # Internal (instrument() uses it): sync ``hook(job)`` for an attempt whose before hooks ran but
    # that gets no outcome hook because the worker is ending: an AsyncWorker cancelled its handler
    # at the shutdown deadline and gives the job back (or leaves its thread's lease to expire).
    on_release: list[Hook] = field(default_factory=list)
    # Internal: the sync after / on_retry / on_failure hooks of instrument() and
    # instrument_tracing(). They run even when the worker cuts the hooks (see _run_uncut).
    uncut: list[Hook] = field(default_factory=list)
    # Set once a thread Worker's handlers were built (App.handlers): they call hooks without
    # awaiting them, so an async hook added later would be called and never awaited.
    sync_handlers_built: bool = False

    def add(self, kind: list[Hook], hook: H) -> H:
        if not callable(hook):
            raise TypeError(f"a hook must be callable, got {hook!r}")
        if self.sync_handlers_built and inspect.iscoroutinefunction(hook):
            raise TypeError(
                f"async hook {getattr(hook, '__qualname__', hook)!r} added after a thread Worker's "
                "handlers were built (app.handlers()), which would never await it: register async "
                "hooks before building workers, and run their queues on an AsyncWorker"
            )
        kind.append(hook)
        return hook

    def add_uncut(self, kind: list[Hook], hook: H) -> H:
        """Add an instrumentation's sync outcome hook, which a worker's cut does not skip."""
        self.uncut.append(hook)
        return self.add(kind, hook)

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.on_retry or self.on_failure)

    def any_async(self) -> bool:
        every = self.before + self.after + self.on_retry + self.on_failure
        return any(inspect.iscoroutinefunction(h) for h in every)

    def after_failure(self, job: Job, exc: BaseException, retry: bool | None = None) -> list[Hook]:
        retry = will_retry(job, exc) if retry is None else retry
        return list(reversed(self.on_retry if retry else self.on_failure))


def stop_outcome(job: Job, still_running: bool) -> tuple[BaseException, bool]:
    """What failure hooks get for an attempt the worker stopped (``job.stop_reason`` is set): the
    exception carrying the error the worker settles it with (``_outcomes.stopped``), and whether
    it is retried, so the hooks and the stored outcome always agree."""
    failure = stopped(job, job.stop_reason or TIMEOUT, still_running)
    kind = asyncio.CancelledError if job.stop_reason == CANCEL else TimeoutError
    exc = kind(failure.error)
    return exc, failure.retry and will_retry(job, exc)


def _report(hook: Hook, exc: BaseException) -> None:
    log.exception("hook %s raised %s; ignored", getattr(hook, "__qualname__", hook), type(exc).__name__)


def _the_workers_cancel(exc: BaseException) -> bool:
    """Whether ``exc`` is the worker cancelling the attempt, not a CancelledError of a hook's own."""
    me = asyncio.current_task()
    return isinstance(exc, asyncio.CancelledError) and me is not None and me.cancelling() > 0


def _run_failure_hooks(hooks: Hooks, job: Job, exc: BaseException, retry: bool | None = None) -> None:
    for hook in hooks.after_failure(job, exc, retry):
        try:
            hook(job, exc)
        except BaseException as hook_exc:  # sys.exit() too: the outcome is decided, ignored
            _report(hook, hook_exc)


async def _arun_failure_hooks(hooks: Hooks, job: Job, exc: BaseException, retry: bool | None = None) -> None:
    """Run the failure hooks of an outcome already decided: the worker cancelling the attempt (its
    shutdown deadline) cuts the remaining hooks, not that outcome; re-raised, it gave the job back
    as never settled, so a failure without retry ran again. A hook's own CancelledError (it awaited
    a future cancelled elsewhere) is ignored like any other error."""
    rest = iter(hooks.after_failure(job, exc, retry))
    for hook in rest:
        try:
            if (pending := _start(hook, job, exc)) is not None:
                await pending
        except BaseException as hook_exc:  # sys.exit() too: the outcome is decided, ignored
            if _the_workers_cancel(hook_exc):
                _run_uncut(hooks, rest, job, exc)
                break  # the slot settles the outcome the caller returns or raises, then ends
            _report(hook, hook_exc)


def _run_uncut(hooks: Hooks, rest: Iterator[Hook], *args: Any) -> None:
    """The instrumentation's hooks among ``rest``, the hooks a worker's cancel cut (a time limit or
    the shutdown deadline passing in an async hook before them): the outcome they report stands,
    so skipping them left it uncounted in the metrics and its span never ended."""
    for hook in rest:
        if hook in hooks.uncut:
            try:
                hook(*args)
            except BaseException as hook_exc:
                _report(hook, hook_exc)


def _preparer(task: Task[..., Any], settings: QueueSettings | None) -> Callable[[Any], PreparedResult] | None:
    """Serialises a return value in the hook wrapper when results are stored: one that cannot be
    stored fails the attempt, so the failure hooks must run, not the ``after`` hooks."""
    if settings is None or not settings.store_results:
        return None
    return functools.partial(prepare_result, settings, task.name)


def sync_handler(task: Task[..., Any], hooks: Hooks, settings: QueueSettings | None = None) -> SyncHandler:
    """A thread worker's handler for ``task`` (sync task, sync hooks only); ``settings``: the
    queue's, whose results it serialises."""
    fn, prepare = task.fn, _preparer(task, settings)

    def bare(job: Job) -> Any:
        args, kwargs = unpack_arguments(job)
        _CURRENT_JOB.set(job)  # each slot thread has its own context: no reset needed
        return fn(*args, **kwargs)

    def hooked(job: Job) -> Any:
        # Checked per call, not when the handler is built: an app with no hook yet got a bare
        # handler, and instrument() called after its workers were built counted nothing for them.
        if not hooks:
            return bare(job)
        # A thread worker abandons a stopped attempt's thread and settles it as failed, never
        # retried: what the task returns or raises after that is reported as that failure.
        try:
            for hook in hooks.before:
                hook(job)
            if job.stop_reason is not None:  # cancelled or timed out during the hooks: settled
                _run_failure_hooks(hooks, job, *stop_outcome(job, True))  # already, never started
                return None
            result = bare(job)
            job._returned = job.stop_reason is None  # (one that swallowed its stop did not complete)
        except BaseException as exc:  # SystemExit too: the worker fails the attempt, the hooks say so
            _run_failure_hooks(hooks, job, *(stop_outcome(job, True) if job.stop_reason else (exc, None)))
            raise
        if job.stop_reason is not None:
            _run_failure_hooks(hooks, job, *stop_outcome(job, True))
            return result
        prepared = prepare(result) if prepare is not None else None
        job._return_value = (result if prepared is None else prepared,)  # its outcome, decided
        if prepared is not None and prepared.error is not None:
            _run_failure_hooks(hooks, job, prepared.error, False)
            return prepared
        for hook in reversed(hooks.after):
            try:
                hook(job, result)
            except BaseException as hook_exc:  # sys.exit() too: the outcome is decided, ignored
                _report(hook, hook_exc)
        return result if prepared is None else prepared

    return hooked


def _start(hook: Hook, *args: Any) -> Any:
    """Call a hook; returns what to await when it is async, None when it is done (a sync hook
    then costs no coroutine per call)."""
    result = hook(*args)
    return result if result is not None and inspect.isawaitable(result) else None


def async_handler(task: Task[..., Any], hooks: Hooks, settings: QueueSettings | None = None) -> AsyncHandler:
    """An asyncio worker's handler for ``task``; a sync task runs in a thread (asyncio.to_thread);
    ``settings``: the queue's, whose results it serialises."""
    fn, prepare = task.fn, _preparer(task, settings)

    async def bare(job: Job) -> Any:
        args, kwargs = unpack_arguments(job)
        _CURRENT_JOB.set(job)  # in the slot task's context; to_thread copies it to the thread
        if not task.is_async:
            job._thread_running = False  # until a thread of the executor takes the call
            return await asyncio.to_thread(_in_a_thread, job, fn, args, kwargs)
        return await fn(*args, **kwargs)

    async def hooked(job: Job) -> Any:
        if not hooks:  # checked per call, as in sync_handler
            return await bare(job)
        if not task.is_async:  # no thread runs it during the before hooks: stopped then, it never
            job._thread_running = False  # ran, and is retried (it was failed as still running)
        try:
            for hook in hooks.before:
                if (pending := _start(hook, job)) is not None:
                    await pending
            result = await bare(job)
            job._returned = job.stop_reason is None  # (one that swallowed its stop did not complete)
        except asyncio.CancelledError as exc:
            me = asyncio.current_task()
            if job.stop_reason is not None:  # stopped by the worker: time limit or cancel
                await _arun_failure_hooks(hooks, job, *stop_outcome(job, _thread_runs(task, job)))
            elif not (me and me.cancelling()):  # raised by the task itself: a failure like any other
                await _arun_failure_hooks(hooks, job, exc)
            else:  # the worker is ending: the job is given back, with no outcome
                for hook in hooks.on_release:
                    try:
                        hook(job)
                    except BaseException as hook_exc:
                        _report(hook, hook_exc)
            raise
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker fails the
            # attempt. Raised once the worker asked it to stop: settled as stopped (see AsyncWorker).
            stop = stop_outcome(job, _thread_runs(task, job)) if job.stop_reason else (exc, None)
            await _arun_failure_hooks(hooks, job, *stop)
            raise
        if job.stop_reason is not None:  # it swallowed its stop and returned: settled as stopped
            await _arun_failure_hooks(hooks, job, *stop_outcome(job, _thread_runs(task, job)))
            return result
        prepared = prepare(result) if prepare is not None else None
        if prepared is not None and prepared.error is not None:
            await _arun_failure_hooks(hooks, job, prepared.error, False)
            return prepared
        rest = reversed(hooks.after)
        for hook in rest:
            try:
                if (pending := _start(hook, job, result)) is not None:
                    await pending
            except BaseException as hook_exc:  # sys.exit() too: the outcome is decided, ignored
                if _the_workers_cancel(hook_exc):  # its time limit or shutdown deadline: they bound
                    _run_uncut(hooks, rest, job, result)  # the task, which completed; the
                    break  # remaining hooks are cut, not its success
                _report(hook, hook_exc)
        return result if prepared is None else prepared

    return in_thread(hooked, not task.is_async)


def _thread_runs(task: Task[..., Any], job: Job) -> bool:
    """Whether a thread may still run a stopped attempt of a sync task (as ``thread_runs_on``)."""
    return not task.is_async and not _no_thread_takes(job)


def _no_thread_takes(job: Job) -> bool:
    """Whether no thread runs the call of a stopped attempt: then none ever will (its call is
    dropped), since the worker retries it or gives it back as never run."""
    with _TAKING:
        if job._thread_running is False:
            job._call_dropped = True
        return job._thread_running is False


def _in_a_thread(job: Job, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """Run a sync task's call, recording on ``job`` while its thread runs it: an attempt stopped
    before a thread took it never ran, so it can be retried (see AsyncWorker). A thread that
    takes the call once the worker took it for never run does not run it: the executor may have
    handed it to this thread just before the stop, which could no longer withdraw it."""
    with _TAKING:
        if job._call_dropped:
            return None  # (its outcome is dropped: the worker settled the attempt)
        job._thread_running = True
    try:
        return fn(*args, **kwargs)
    finally:
        job._thread_running = False


def in_thread(handler: AsyncHandler, threaded: bool) -> AsyncHandler:
    """Mark an asyncio worker's handler that runs its task in a thread: cancelling it does not
    stop the thread, so a stopped attempt of it is not retried (see AsyncWorker)."""
    if threaded:
        handler.runs_in_thread = True  # type: ignore[attr-defined]
    return handler


def thread_runs_on(handler: Any, job: Job) -> bool:
    """Whether a stopped attempt of ``job`` may still run in a thread: its handler is marked
    ``runs_in_thread`` and did not record that no thread ran it (an app's sync task records it;
    another marked handler is taken to run on)."""
    return bool(getattr(handler, "runs_in_thread", False)) and not _no_thread_takes(job)
