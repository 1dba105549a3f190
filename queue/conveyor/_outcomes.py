"""How a job's attempt settles when it does not simply complete: failures, stops, return values.

Pure functions shared by Worker, AsyncWorker and the hooks; no I/O here (``fail_call`` builds the
fail script's call, the worker sends it).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from ._errors import SerializationError
from ._models import Job, QueueSettings
from ._ops import Call, QueueCore
from ._replies import CANCEL
from ._results import PreparedResult, prepare_result
from ._worker_errors import log


@dataclass(frozen=True, slots=True)
class Failure:
    """A handler's failed attempt, waiting to be sent to the fail script."""

    job: Job
    error: str
    retry: bool
    started: bool = True  # False: stopped before a handler took it (a cancel then says it never ran)
    hold: bool = False  # its stopped handler still runs: its limit key's slot stays held (fail.lua)


def failure_of(job: Job, exc: BaseException) -> Failure:
    """What to record for a handler that raised: the error text, and whether a retry can help."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    stack = "".join(traceback.format_tb(exc.__traceback__)[-3:])
    return Failure(job, f"{detail}\n{stack}".strip(), not isinstance(exc, SerializationError))


def settle_return(settings: QueueSettings, job: Job, value: Any) -> tuple[Failure | None, bytes | None]:
    """What a handler's return value settles to: (None, its serialised form) when results are
    stored, (None, None) when not, or a failure without retry when it cannot be stored (too large
    or not serialisable: a rerun would fail the same way)."""
    if type(value) is PreparedResult:  # settled by an app's hook wrapper, whose hooks already ran
        prepared = value
    elif not settings.store_results:
        return None, None
    else:
        prepared = prepare_result(settings, job.task, value)
    if prepared.error is not None:  # failed as the failure hooks said
        return Failure(job, f"{type(prepared.error).__name__}: {prepared.error}", False), None
    return None, prepared.data if settings.store_results else None


def missing_handler(job: Job) -> Failure:
    return Failure(job, f"no handler is registered for task {job.task!r}", True)


def stopped(job: Job, reason: str, still_running: bool) -> Failure:
    """How a stopped attempt is settled (by the fail script, which ends a job whose cancel was
    requested as cancelled). A timed-out attempt is retried while attempts remain, unless its
    handler thread still runs: a retry would then run the job twice at once."""
    if reason == CANCEL:
        return Failure(job, "cancelled while running", False, hold=still_running)
    limit = job.time_limit
    text = f"timed out: the attempt exceeded its time limit of {limit:g} s" if limit else "timed out"
    if still_running:
        text += " (its handler was still running: not retried, a retry would run the job twice at once)"
    return Failure(job, text, not still_running, hold=still_running)


def fail_call(core: QueueCore, failure: Failure) -> Call[str]:
    """The fail script call of a failure; one job's retry arithmetic can never stop a worker."""
    try:
        return core.fail(failure.job, failure.error, failure.retry, failure.started, failure.hold)
    except Exception:
        log.exception("cannot schedule a retry of job %s; failing it for good", failure.job.id)
        error = failure.error + "\n(no retry: it could not be scheduled)"
        return core.fail(failure.job, error, False, failure.started, failure.hold)
