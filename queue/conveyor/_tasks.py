"""Typed tasks: a registered function plus its defaults, enqueued with the function's own signature.

A task's payload is ``{"args": [...], "kwargs": {...}}`` (either part omitted when empty, plus
``"trace"``, the W3C trace context, when tracing is on), encoded by the queue's serializer (JSON by
default). Arguments are checked against the function's signature
before anything is sent, so a wrong call fails in the caller, not later in a worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from ._errors import SerializationError
from ._keys import validate_job_id, validate_name
from ._models import Job, JobSpec, Limit, check_priority, is_time_limit
from ._ops import delay_ms_of

if TYPE_CHECKING:
    from ._app import Conveyor

PAYLOAD_KEYS = frozenset({"args", "kwargs", "trace"})
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """Per-task defaults; every enqueue may override ``job_id``, ``delay``, ``max_attempts`` and
    ``priority`` (a level in 0..9, higher claimed first) and ``limit`` (per-key concurrency and rate,
    ``Limit``; for example one key per tenant) through ``Task.with_options()``.

    ``time_limit`` (seconds) is stored in each job enqueued and bounds every attempt from its claim
    (see "Time limits" on the production page): an async task is cancelled at the limit; a sync
    task's thread cannot be interrupted: its job is settled as timed out and
    ``current_job().cancelled`` turns True so it can stop on its own.
    """

    queue: str
    max_attempts: int | None = None
    delay: float = 0.0
    time_limit: float | None = None
    job_id: str | None = None
    priority: int = 0
    limit: Limit | None = None

    def __post_init__(self) -> None:
        validate_name("queue name", self.queue)
        check_priority(self.priority)
        if self.limit is not None and not isinstance(self.limit, Limit):
            raise TypeError(f"limit must be a conveyor.Limit, got {self.limit!r}")
        if self.max_attempts is not None and (type(self.max_attempts) is not int or self.max_attempts < 1):
            raise ValueError(f"max_attempts must be an int >= 1, got {self.max_attempts!r}")
        delay_ms_of(self.delay)
        if self.time_limit is not None and not is_time_limit(self.time_limit):
            raise ValueError(f"time_limit must be a number of seconds > 0, got {self.time_limit!r}")
        if self.job_id is not None:
            validate_job_id(self.job_id)


def pack_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    if args:
        payload["args"] = list(args)
    if kwargs:
        payload["kwargs"] = kwargs
    return payload


def unpack_arguments(job: Job) -> tuple[list[Any], dict[str, Any]]:
    """The call arguments stored in a job; a payload of another shape fails the job for good."""
    payload = job.payload
    if payload is None:
        return [], {}
    if isinstance(payload, dict) and set(payload) <= PAYLOAD_KEYS:
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        if isinstance(args, list) and isinstance(kwargs, dict):
            return args, kwargs
    raise SerializationError(
        f"job {job.id!r} of task {job.task!r} has a payload that is not task arguments "
        "({'args': [...], 'kwargs': {...}})"
    )


class Task(Generic[P, R]):
    """A function registered with [Conveyor.task()][conveyor.Conveyor.task].

    Calling the task runs the function here and now; [enqueue()][conveyor.Task.enqueue] (or
    [aenqueue()][conveyor.Task.aenqueue] from asyncio) sends it to a worker with the same arguments,
    checked by mypy through ``ParamSpec``.
    """

    def __init__(self, app: Conveyor, name: str, fn: Callable[P, R], options: TaskOptions) -> None:
        self.app, self.name, self.fn, self.options = app, validate_name("task name", name), fn, options
        self.is_async = inspect.iscoroutinefunction(fn)
        self._signature = inspect.signature(fn)

    @property
    def queue(self) -> str:
        return self.options.queue

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Task({self.name!r}, queue={self.queue!r})"

    def with_options(
        self,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        max_attempts: int | None = None,
        queue: str | None = None,
        priority: int | None = None,
        time_limit: float | None = None,
        limit: Limit | None = None,
    ) -> Task[P, R]:
        """This task with other defaults for the next enqueue (the registry is not changed).
        ``queue`` may only name the task's own queue: workers serve a task on the queue it was
        registered with, so a job sent elsewhere would wait there for ever."""
        if queue is not None and queue != self.queue:
            raise ValueError(
                f"task {self.name!r} is registered on queue {self.queue!r}, where its workers serve it; "
                f"with_options(queue={queue!r}) would leave its jobs waiting: register the task with "
                f"@app.task(queue={queue!r}) instead"
            )
        changes: dict[str, Any] = {
            "job_id": job_id,
            "delay": delay,
            "max_attempts": max_attempts,
            "queue": queue,
            "priority": priority,
            "time_limit": time_limit,
            "limit": limit,
        }
        options = replace(self.options, **{k: v for k, v in changes.items() if v is not None})
        return Task(self.app, self.name, self.fn, options)

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> JobSpec:
        """The job this call would enqueue, for ``Queue.enqueue_many`` on the task's queue."""
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.name!r}: {exc}") from None
        o, payload = self.options, pack_arguments(args, kwargs)
        if self.app.trace_carrier is not None and (carrier := self.app.trace_carrier()):
            payload["trace"] = carrier  # the enqueuing span's context, for the handler's span
        return JobSpec(
            self.name, payload, o.job_id, o.delay, o.max_attempts, o.priority, o.time_limit, o.limit
        )

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Send one job to the task's queue (synchronous client)."""
        job = self.app.queue(self.queue).enqueue_many([self.spec(*args, **kwargs)])[0]
        self._enqueued(job)
        return job

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Send one job to the task's queue (asyncio client)."""
        job = (await self.app.async_queue(self.queue).enqueue_many([self.spec(*args, **kwargs)]))[0]
        self._enqueued(job)
        return job

    def _enqueued(self, job: Job) -> None:
        if job.created:
            for hook in self.app.enqueue_hooks:
                hook(self.queue, job)
