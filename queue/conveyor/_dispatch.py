"""Worker logic shared by Worker (threads) and AsyncWorker (asyncio): no I/O in this module.

The pump settles finished jobs and claims new ones in one script call, so a busy worker spends
one round trip per batch of jobs instead of several per job. The dispatcher decides how much to
claim, what to ack, which leases need a heartbeat and when a shutdown is complete.
"""

from __future__ import annotations

import inspect
import logging
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ._errors import ConveyorError, SerializationError
from ._keys import validate_name
from ._models import Job
from ._ops import LEASE_STATUS, MAX_BATCH

log = logging.getLogger("conveyor.worker")
# Errors a worker outlives: it backs off and retries (lost server, restart, failover).
RECOVERABLE = (redis.RedisError, redis.exceptions.RedisClusterException, ConveyorError, OSError)


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How a worker runs.

    ``prefetch`` jobs are leased beyond ``concurrency`` to hide round trips: worth a few percent of
    throughput for very short jobs, but a prefetched job waits behind busy handlers while another
    worker may be idle, so the default is 0.
    """

    concurrency: int = 1
    prefetch: int = 0
    burst: bool = False
    shutdown_timeout: float = 30.0
    block_timeout: float = 2.0
    install_signal_handlers: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.concurrency <= MAX_BATCH:
            raise ValueError(f"concurrency must be in 1..{MAX_BATCH}, got {self.concurrency}")
        if not 0 <= self.prefetch <= MAX_BATCH:
            raise ValueError(f"prefetch must be in 0..{MAX_BATCH}, got {self.prefetch}")
        if self.shutdown_timeout < 0 or self.block_timeout <= 0:
            raise ValueError("shutdown_timeout must be >= 0 and block_timeout > 0")

    @property
    def capacity(self) -> int:
        """Most jobs leased at once: running plus prefetched."""
        return min(MAX_BATCH, self.concurrency + self.prefetch)


@dataclass(frozen=True, slots=True)
class Failure:
    """A handler's failed attempt, waiting to be sent to the fail script."""

    job: Job
    error: str
    retry: bool


def validate_handlers(handlers: Mapping[str, Callable[..., Any]], want_async: bool) -> None:
    """Reject handlers of the wrong kind at construction, not at the first job."""
    for task, handler in handlers.items():
        validate_name("task", task)
        if not callable(handler):
            raise TypeError(f"handler for task {task!r} is not callable")
        if inspect.iscoroutinefunction(handler) != want_async:
            kind = "an async def function" if want_async else "a plain (non-async) function"
            raise TypeError(f"handler for task {task!r} must be {kind}")


def failure_of(job: Job, exc: BaseException) -> Failure:
    """What to record for a handler that raised: the error text, and whether a retry can help."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    stack = "".join(traceback.format_tb(exc.__traceback__)[-3:])
    return Failure(job, f"{detail}\n{stack}".strip(), not isinstance(exc, SerializationError))


def missing_handler(job: Job) -> Failure:
    return Failure(job, f"no handler is registered for task {job.task!r}", True)


@dataclass
class Dispatcher:
    """Book-keeping of leased jobs for one worker."""

    options: WorkerOptions
    lease: float
    leases: dict[str, tuple[Job, float]] = field(default_factory=dict)
    done: list[Job] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    stopping: bool = False
    processed: int = 0
    failed: int = 0

    @property
    def held(self) -> int:
        return len(self.leases)

    def claim_budget(self, acking: int) -> int:
        if self.stopping:
            return 0
        return max(0, self.options.capacity - self.held + acking)

    def pending_acks(self) -> list[Job]:
        return self.done[:MAX_BATCH]

    def on_claimed(self, jobs: Sequence[Job]) -> None:
        now = time.monotonic()
        for job in jobs:
            self.leases[job.id] = (job, now)

    def on_acked(self, acked: Sequence[Job], statuses: Sequence[int]) -> None:
        del self.done[: len(acked)]
        for job, status in zip(acked, statuses, strict=True):
            self._settle(job)
            if status == 1:
                self.processed += 1
            else:
                log.warning("ack of job %s refused: %s", job.id, LEASE_STATUS.get(status, status))

    def on_failed(self, failure: Failure) -> None:
        self.failures.remove(failure)
        self.failed += 1
        self._settle(failure.job)

    def _settle(self, job: Job) -> None:
        self.leases.pop(job.id, None)
        self.started.discard(job.id)

    def needs_heartbeat(self) -> list[Job]:
        """Leased jobs whose lease is a third used up: extend them before it runs out."""
        cutoff = time.monotonic() - self.lease / 3
        return [job for job, since in list(self.leases.values()) if since <= cutoff][:MAX_BATCH]

    def on_extended(self, jobs: Sequence[Job], statuses: Sequence[int]) -> None:
        now = time.monotonic()
        for job, status in zip(jobs, statuses, strict=True):
            if status == 1 and job.id in self.leases:
                self.leases[job.id] = (job, now)
            elif status != 1:
                log.warning("lease of job %s lost: %s", job.id, LEASE_STATUS.get(status, status))

    def unsettled(self) -> tuple[list[Job], list[bool]]:
        """Leased jobs with nothing to report, for release at shutdown: (jobs, started flags)."""
        reporting = {job.id for job in self.done} | {f.job.id for f in self.failures}
        jobs = [job for job, _ in self.leases.values() if job.id not in reporting][:MAX_BATCH]
        return jobs, [job.id in self.started for job in jobs]

    def on_released(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self._settle(job)

    def quiet(self) -> bool:
        """Nothing leased and nothing to report."""
        return not self.leases and not self.done and not self.failures

    def stats(self) -> dict[str, int]:
        return {"processed": self.processed, "failed": self.failed, "held": self.held}


def idle_wait(block_timeout: float, until_due: float) -> float:
    """How long an idle worker blocks on the marker: until the next delayed job, at most the block."""
    return block_timeout if until_due < 0 else max(0.01, min(block_timeout, until_due))
