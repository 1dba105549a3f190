"""Reads and failed-job admin of the twins, as their base classes: ``QueueAdmin`` of Queue,
``AsyncQueueAdmin`` of AsyncQueue (``counts``, ``get_job``, ``jobs``, ``retry_failed``,
``purge_failed``). What is not I/O is in ``_inspect.py``; script calls go through the twin's
``_run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import redis
import redis.asyncio as aredis

from ._base import ASYNC_ERRORS, REDIS_ERRORS, QueueBase
from ._errors import ConveyorError
from ._inspect import (
    FailedBatches,
    WaitingPage,
    list_range,
    listed_ids,
    listed_jobs,
    purge_failed,
    retry_failed,
)
from ._keys import validate_name
from ._models import Job
from ._ops import Call

T = TypeVar("T")


class QueueAdmin(QueueBase[redis.Redis]):
    """Reads and failed-job admin of [Queue][conveyor.Queue] (its base class)."""

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

    def counts(self) -> dict[str, int]:
        """Jobs per state, plus total_completed and total_failed since the queue was created."""
        closes = self._closes  # see _error
        pipe = self.client.pipeline(transaction=False)
        self._queue_counts(pipe)
        try:
            return self.core.parse_counts(pipe.execute())
        except REDIS_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    def get_job(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        closes = self._closes  # see _error
        validate_name("job id", job_id)  # 5 or None failed in the key's concatenation (a bare TypeError)
        pipe = self.client.pipeline(transaction=False)
        self._queue_read(pipe, "hgetall", self.core.keys.job(job_id))
        try:
            fields = self._checked_read(pipe.execute(raise_on_error=False))
            return self.core.parse_job(job_id, fields)
        except REDIS_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    def jobs(self, state: str, offset: int = 0, limit: int = 100) -> list[Job]:
        """A page of jobs in ``state``: waiting in claim order (then the jobs parked at their limit
        key's concurrency, in the order freed slots release them), delayed and active by due time,
        completed, failed and cancelled newest first. Jobs that change state meanwhile are left out."""
        closes = self._closes  # see _error
        page = list_range(self.core, state, offset, limit)
        if isinstance(page, WaitingPage):
            ids = self._waiting_ids(page)
        try:
            if not isinstance(page, WaitingPage):
                pipe = self.client.pipeline(transaction=False)
                self._queue_read(pipe, *page)
                ids = listed_ids(self._checked_read(pipe.execute(raise_on_error=False)))
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(self.core.keys.job(job_id))
            found = pipe.execute() if ids else []
        except REDIS_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc
        return listed_jobs(self.core, state, ids, found)

    def _waiting_ids(self, page: WaitingPage) -> list[str]:
        """Run ``page``'s steps (see ``WaitingPage``)."""
        step: Call[None] | str | None = page.ready()
        while step is not None:
            if isinstance(step, str):
                page.walk(self._registry(step))
            else:
                self._run(step)
            step = page.next()
        return page.ids

    def _registry(self, key: str) -> Any:
        closes = self._closes  # see _error
        try:
            return self.client.hgetall(key)
        except REDIS_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    def retry_failed(self, job_ids: Sequence[str] | None = None, batch: int = 1000) -> int:
        """Re-queue failed jobs with their attempts reset: the given ids, or (None) every job failed
        when the call starts; one script call per ``batch``. Returns how many were re-queued."""
        return self._failed_batches(retry_failed, job_ids, batch)

    def purge_failed(self, job_ids: Sequence[str] | None = None, batch: int = 1000) -> int:
        """Delete failed jobs: the given ids, or (None) every job failed when the call starts; one
        script call per ``batch``. Returns how many were deleted."""
        return self._failed_batches(purge_failed, job_ids, batch)

    def _failed_batches(self, build: Any, job_ids: Sequence[str] | None, batch: int) -> int:
        closes = self._closes  # see _error
        plan = FailedBatches(self.core, build, job_ids, batch)
        if plan.batches is None:
            # "All": bounded by the count at the start, so jobs failing again meanwhile stop it.
            try:
                plan.limit = int(self.client.zcard(self.core.keys.failed))
            except REDIS_ERRORS as exc:
                raise self._error(exc, closes, read_only=True) from exc
        try:
            while (call := plan.next_call()) is not None:
                plan.applied(self._run(call))
            return plan.done
        except ConveyorError as exc:
            raise plan.failed(exc) from exc.__cause__
        except KeyboardInterrupt as exc:  # Ctrl-C: say what the batches that returned did
            raise plan.interrupted() from exc


class AsyncQueueAdmin(QueueBase[aredis.Redis]):
    """Reads and failed-job admin of [AsyncQueue][conveyor.AsyncQueue] (its base class)."""

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        def _own_loop(self) -> None: ...

    async def counts(self) -> dict[str, int]:
        """Jobs per state, plus total_completed and total_failed since the queue was created."""
        closes = self._closes  # see _error
        self._own_loop()
        pipe = self.client.pipeline(transaction=False)
        self._queue_counts(pipe)
        try:
            return self.core.parse_counts(await pipe.execute())
        except ASYNC_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    async def get_job(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        closes = self._closes  # see _error
        validate_name("job id", job_id)  # 5 or None failed in the key's concatenation (a bare TypeError)
        self._own_loop()
        pipe = self.client.pipeline(transaction=False)
        self._queue_read(pipe, "hgetall", self.core.keys.job(job_id))
        try:
            fields = self._checked_read(await pipe.execute(raise_on_error=False))
            return self.core.parse_job(job_id, fields)
        except ASYNC_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    async def jobs(self, state: str, offset: int = 0, limit: int = 100) -> list[Job]:
        """A page of jobs in ``state``: waiting in claim order (then the jobs parked at their limit
        key's concurrency, in the order freed slots release them), delayed and active by due time,
        completed, failed and cancelled newest first. Jobs that change state meanwhile are left out."""
        closes = self._closes  # see _error
        page = list_range(self.core, state, offset, limit)
        self._own_loop()
        if isinstance(page, WaitingPage):
            ids = await self._waiting_ids(page)
        try:
            if not isinstance(page, WaitingPage):
                pipe = self.client.pipeline(transaction=False)
                self._queue_read(pipe, *page)
                ids = listed_ids(self._checked_read(await pipe.execute(raise_on_error=False)))
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(self.core.keys.job(job_id))
            found = await pipe.execute() if ids else []
        except ASYNC_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc
        return listed_jobs(self.core, state, ids, found)

    async def _waiting_ids(self, page: WaitingPage) -> list[str]:
        """Run ``page``'s steps (see ``WaitingPage``)."""
        step: Call[None] | str | None = page.ready()
        while step is not None:
            if isinstance(step, str):
                page.walk(await self._registry(step))
            else:
                await self._run(step)
            step = page.next()
        return page.ids

    async def _registry(self, key: str) -> Any:
        closes = self._closes  # see _error
        try:
            return await self.client.hgetall(key)
        except ASYNC_ERRORS as exc:
            raise self._error(exc, closes, read_only=True) from exc

    async def retry_failed(self, job_ids: Sequence[str] | None = None, batch: int = 1000) -> int:
        """Re-queue failed jobs with their attempts reset: the given ids, or (None) every job failed
        when the call starts; one script call per ``batch``. Returns how many were re-queued.
        Cancelled between batches, its CancelledError (re-raised as it is) has a note and a
        ``batches_done`` attribute giving how many the batches that completed re-queued."""
        return await self._failed_batches(retry_failed, job_ids, batch)

    async def purge_failed(self, job_ids: Sequence[str] | None = None, batch: int = 1000) -> int:
        """Delete failed jobs: the given ids, or (None) every job failed when the call starts; one
        script call per ``batch``. Returns how many were deleted. Cancelled between batches, as
        ``retry_failed`` (``batches_done``: how many were deleted)."""
        return await self._failed_batches(purge_failed, job_ids, batch)

    async def _failed_batches(self, build: Any, job_ids: Sequence[str] | None, batch: int) -> int:
        closes = self._closes  # see _error
        plan = FailedBatches(self.core, build, job_ids, batch)
        self._own_loop()
        if plan.batches is None:
            # "All": bounded by the count at the start, so jobs failing again meanwhile stop it.
            try:
                plan.limit = int(await self.client.zcard(self.core.keys.failed))
            except ASYNC_ERRORS as exc:
                raise self._error(exc, closes, read_only=True) from exc
        try:
            while (call := plan.next_call()) is not None:
                plan.applied(await self._run(call))
            return plan.done
        except ConveyorError as exc:
            raise plan.failed(exc) from exc.__cause__
        except asyncio.CancelledError as exc:  # a timeout, a shutdown: the same error, with the count
            plan.cancelled(exc)
            raise
