"""Conveyor: the application object holding the task registry, hooks, schedules and queue clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar, overload

from ._async_client import AsyncQueue
from ._base import resolve_settings
from ._client import Queue
from ._errors import ConveyorError, UnknownTaskError
from ._hooks import AsyncHandler, Hook, Hooks, SyncHandler, async_handler, sync_handler
from ._models import Job, Limit, QueueSettings
from ._schedule import Schedule
from ._serialize import encode_payload
from ._tasks import Task, TaskOptions
from ._topology import check_url

P = ParamSpec("P")
R = TypeVar("R")
H = TypeVar("H", bound=Hook)


class Conveyor:
    """Tasks, hooks and schedules of an application, and its clients for the server at ``url``.

    ``settings`` (or keyword overrides of [QueueSettings][conveyor.QueueSettings]) apply to every
    queue of the app. Queue clients are created on first use, one per queue name (sync and asyncio
    separately, and asyncio ones per event loop, so ``aenqueue`` works from any loop); a URL no
    client could use (its scheme, hosts, database or options) is refused here.
    """

    def __init__(
        self,
        url: str,
        *,
        default_queue: str = "default",
        settings: QueueSettings | None = None,
        **overrides: Any,
    ) -> None:
        check_url(url)  # here, not at the first enqueue of a web request
        self.url = url
        self.default_queue = default_queue
        self.settings = resolve_settings(settings, overrides)
        self.tasks: dict[str, Task[..., Any]] = {}
        self.hooks = Hooks()
        self.schedules: dict[str, Schedule] = {}
        self.trace_carrier: Callable[[], dict[str, str]] | None = None  # set by instrument_tracing
        self.enqueue_hooks: list[Callable[[str, Job], None]] = []  # (queue, job) of each job created
        self._instruments: dict[tuple[str, Any], Any] = {}  # see _instrumented()
        self._queues: dict[str, Queue] = {}
        # Per event loop (an AsyncQueue belongs to one): asyncio.run() twice gets two clients.
        self._async_queues: dict[Any, dict[str, AsyncQueue]] = {}
        TaskOptions(queue=default_queue)  # validates the name now, not at the first task

    def __repr__(self) -> str:
        return f"Conveyor(tasks={sorted(self.tasks)}, queues={self.queue_names()})"

    # -- registry ---------------------------------------------------------------------------------
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        delay: float = 0.0,
        time_limit: float | None = None,
        priority: int = 0,
        limit: Limit | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        delay: float = 0.0,
        time_limit: float | None = None,
        priority: int = 0,
        limit: Limit | None = None,
    ) -> Any:
        """Register a sync or async function as a task (bare ``@app.task`` or with defaults).

        The task's name defaults to the function's ``__name__`` and its queue to the app's
        ``default_queue`` (an empty ``name`` or ``queue`` is refused); names are unique per app.
        """
        # None, not any false value, means "the default": name="" or queue="" is refused.
        options = TaskOptions(
            self.default_queue if queue is None else queue,
            max_attempts,
            delay,
            time_limit,
            priority=priority,
            limit=limit,
        )

        def register(function: Callable[..., Any]) -> Task[..., Any]:
            if not callable(function):  # else AttributeError: no '__name__'
                raise TypeError(
                    f"app.task() takes a function (@app.task or @app.task(name=...)), got "
                    f"{function!r}; give a task's name as a keyword: app.task(name=...)"
                )
            task_name = getattr(function, "__name__", None) if name is None else name
            if task_name is None:  # a functools.partial, a callable object
                raise TypeError(f"{function!r} has no __name__: give the task's name, app.task(name=...)")
            task = Task(self, task_name, function, options)
            if task.name in self.tasks:
                raise ValueError(f"task {task.name!r} is already registered ({self.tasks[task.name].fn!r})")
            self.tasks[task.name] = task
            return task

        return register if fn is None else register(fn)

    def get_task(self, name: str) -> Task[..., Any]:
        """The registered task called ``name``; [UnknownTaskError][conveyor.UnknownTaskError] names it
        otherwise."""
        try:
            return self.tasks[name]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise UnknownTaskError(f"unknown task {name!r} (registered: {known})") from None

    def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Job:
        """Enqueue a registered task by name (untyped; prefer ``task.enqueue``)."""
        return self.get_task(name).enqueue(*args, **kwargs)

    async def aenqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Job:
        """Enqueue a registered task by name from asyncio (untyped; prefer ``task.aenqueue``)."""
        return await self.get_task(name).aenqueue(*args, **kwargs)

    def queue_names(self) -> list[str]:
        """Queues that registered tasks go to, sorted."""
        return sorted({task.queue for task in self.tasks.values()})

    # -- periodic jobs ----------------------------------------------------------------------------
    def periodic(
        self,
        name: str,
        task: Task[..., Any] | str,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str = "UTC",
        missed: Literal["once", "skip"] = "once",
        grace: float = 60.0,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Schedule:
        """Enqueue ``task(*args, **kwargs)`` on a cron expression (in time zone ``tz``) or ``every``
        seconds. Workers started with the scheduler fire it; each fire time is enqueued once however
        many run. ``missed``: after downtime run the latest missed fire ``"once"``, or ``"skip"``
        fires older than ``grace`` seconds.
        """
        target = self.get_task(task) if isinstance(task, str) else task
        if target.app is not self or target.name not in self.tasks:  # another app's Task object
            raise UnknownTaskError(
                f"task {target.name!r} is not registered in this app: its workers could not run the "
                f"fired jobs (register it with @app.task)"
            )
        spec = target.spec(*args, **(kwargs or {}))
        if spec.job_id is not None:  # was dropped silently: each fire has an id of its own
            raise ValueError(
                f"schedule {name!r}: a fired job's id is 'cron:{name}:<fire time in ms>'; "
                f"the task's job_id {spec.job_id!r} (with_options) cannot be used"
            )
        schedule = Schedule(name, target.name, target.queue, cron, every, tz, missed, grace,
                            spec.payload, spec.max_attempts, spec.time_limit, spec.priority,
                            spec.limit, spec.delay)  # fmt: skip
        if name in self.schedules:
            raise ValueError(f"schedule {name!r} is already registered")
        try:  # its job is built at every fire: a payload that cannot be is refused now, not then
            encode_payload(
                self.settings.serializer, target.name, spec.payload, self.settings.max_payload_bytes
            )
        except ConveyorError as exc:
            raise type(exc)(f"schedule {name!r}: {exc}") from exc
        self.schedules[name] = schedule
        return schedule

    # -- hooks ------------------------------------------------------------------------------------
    def _instrumented(self, key: tuple[str, Any], install: Callable[[], R]) -> R:
        """What ``install`` made for ``key`` (an instrumentation and its sink), installing it only
        the first time: the app module may instrument its app and a launcher (``conveyor worker
        --metrics-port``) instrument it again, and hooks added twice would count every call twice."""
        if key not in self._instruments:
            self._instruments[key] = install()
        return self._instruments[key]  # type: ignore[no-any-return]

    def before(self, hook: H) -> H:
        """Register ``hook(job)``, run before every task call."""
        return self.hooks.add(self.hooks.before, hook)

    def after(self, hook: H) -> H:
        """Register ``hook(job, result)``, run after every successful task call."""
        return self.hooks.add(self.hooks.after, hook)

    def on_retry(self, hook: H) -> H:
        """Register ``hook(job, exc)``, run when a failed attempt will be retried."""
        return self.hooks.add(self.hooks.on_retry, hook)

    def on_failure(self, hook: H) -> H:
        """Register ``hook(job, exc)``, run when a job fails for good, or is cancelled while it runs
        (``exc`` is then an ``asyncio.CancelledError``)."""
        return self.hooks.add(self.hooks.on_failure, hook)

    # -- what workers run -------------------------------------------------------------------------
    def _tasks_of(self, queue: str) -> list[Task[..., Any]]:
        return [task for task in self.tasks.values() if task.queue == queue]

    def needs_asyncio(self, queues: list[str]) -> bool:
        """Whether workers for ``queues`` must run on asyncio (an async task or any async hook)."""
        return self.hooks.any_async() or any(t.is_async for q in queues for t in self._tasks_of(q))

    def handlers(self, queue: str) -> dict[str, SyncHandler]:
        """Handlers for a thread [Worker][conveyor.Worker] on ``queue`` (every task there must be sync)."""
        if self.hooks.any_async():
            raise TypeError("an async hook is registered: run the worker on asyncio (AsyncWorker)")
        handlers: dict[str, SyncHandler] = {}
        for task in self._tasks_of(queue):
            if task.is_async:
                raise TypeError(f"task {task.name!r} is async: run queue {queue!r} on an AsyncWorker")
            handlers[task.name] = sync_handler(task, self.hooks, self.settings)
        self.hooks.sync_handlers_built = True
        return handlers

    def async_handlers(self, queue: str) -> dict[str, AsyncHandler]:
        """Handlers for an [AsyncWorker][conveyor.AsyncWorker] on ``queue``; sync tasks run in threads."""
        return {task.name: async_handler(task, self.hooks, self.settings) for task in self._tasks_of(queue)}

    # -- clients ----------------------------------------------------------------------------------
    def queue(self, name: str) -> Queue:
        """The app's synchronous client for queue ``name`` (created on first use)."""
        client = self._queues.get(name)
        if client is None:
            client = self._queues[name] = Queue.from_url(self.url, name, settings=self.settings)
        return client

    def async_queue(self, name: str) -> AsyncQueue:
        """The app's asyncio client for queue ``name`` on the running event loop (created on first
        use in each loop: an AsyncQueue belongs to the loop it runs on)."""
        loop = _running_loop()
        if loop not in self._async_queues:  # a new loop: forget the clients of closed ones
            for old in list(self._async_queues):  # a copy: another thread's loop may add one
                if old is not _NO_LOOP and old.is_closed():
                    self._async_queues.pop(old, None)  # (its connections close as they are collected)
        clients = self._async_queues.setdefault(loop, {})
        client = clients.get(name)
        if client is None:
            client = clients[name] = AsyncQueue.from_url(self.url, name, settings=self.settings)
        return client

    def close(self) -> None:
        """Close the synchronous clients (asyncio clients: [aclose()][conveyor.Conveyor.aclose])."""
        for client in self._queues.values():
            client.close()
        self._queues.clear()

    async def aclose(self) -> None:
        """Close the asyncio clients of the running event loop (those of a closed loop went with
        it), and those created outside any loop."""
        for key in (_running_loop(), _NO_LOOP):
            for client in self._async_queues.pop(key, {}).values():
                await client.aclose()


class _NoLoop:
    """The key of asyncio clients created outside a running event loop."""


_NO_LOOP = _NoLoop()


def _running_loop() -> Any:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return _NO_LOOP
