"""Sans-I/O core shared by Queue and AsyncQueue: builds script calls and parses their replies.

A ``Call`` is everything needed to run one transition (script, KEYS, ARGV) plus the pure
function that turns the reply into a result. The sync and async clients only execute calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._errors import SchemaVersionError
from ._keys import QueueKeys, queue_keys, validate_job_id, validate_name
from ._models import (
    MAX_PRIORITY,
    Job,
    JobSpec,
    Limit,
    QueueSettings,
    check_priority,
    time_limit_ms,
)
from ._replies import (
    claimed_jobs,
    enqueued_jobs,
    held_token,
    lease_error,
    queue_counts,
    stored_job,
    text,
    until_due,
)
from ._retry import retry_delay_ms
from ._scripts import Script, Scripts
from ._serialize import encode_payload
from ._settings_checks import MAX_SECONDS, _count_problem

NULL_RECORD = b"c:null"  # the success record of None (as _results.encode_result builds it)

T_co = TypeVar("T_co", covariant=True)
_ENQUEUE = Scripts.ENQUEUE.value  # (an Enum member's .value is a descriptor call)
LAYOUT_VERSION = "1"
MAX_BATCH = 1000
MAX_ERROR_CHARS = 4096


def check_count(name: str, value: object, low: int, high: float) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``, else a ValueError naming it: a float
    or a string reached the server, which failed with its own error."""
    problem = _count_problem(name, value, low, high)
    if problem:
        raise ValueError(problem)
    return value  # type: ignore[return-value]


def check_batch(action: str, jobs: Sequence[Job]) -> Sequence[Job]:
    """``jobs`` if it is a list of at most MAX_BATCH jobs, else an error naming the problem: a
    lone Job failed in len(), and a batch over the bound reached the server (CONVEYOR_BOUND)."""
    if isinstance(jobs, Job) or not isinstance(jobs, Sequence):
        raise TypeError(f"{action} takes a list of jobs, got {type(jobs).__name__}")
    if len(jobs) > MAX_BATCH:
        raise ValueError(f"{action} takes at most {MAX_BATCH} jobs at once, got {len(jobs)}")
    return jobs


def release_flags(jobs: Sequence[Job], started: object) -> list[bool]:
    """The per-job started flags of the public ``release(jobs, started)``, its input checked
    (``QueueCore.release`` trusts its caller: a worker's own bounded lists); ``started`` must be
    a bool (a string such as "no" was true, so the job lost the attempt it never ran)."""
    if type(started) is not bool:
        raise TypeError(f"started must be True or False, got {started!r}")
    return [started] * len(check_batch("release", jobs))


@dataclass(slots=True)
class Call(Generic[T_co]):
    """One script invocation and how to read its reply (not frozen: built once per call, and a
    frozen dataclass pays object.__setattr__ per field)."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]
    parse: Callable[[Any], T_co]


class QueueCore:
    """Pure logic of one queue: validation, argument packing and reply parsing."""

    def __init__(self, name: str, settings: QueueSettings) -> None:
        self.name = validate_name("queue name", name)
        self.settings = settings
        self.keys: QueueKeys = queue_keys(settings.prefix, name)
        self._valid_tasks: set[str] = set()
        self.owner: Any = None  # the Queue or AsyncQueue using this core: jobs it returns wait through it
        # Per-call constants, computed once (settings are frozen): the hot path only packs.
        k = self.keys
        self._enqueue_keys = (
            k.meta,
            k.waiting,
            k.delayed,
            k.marker,
            k.jobs,
            k.completed,
            k.failed,
            k.dedup,
            k.cancelled,
        )
        # A call carrying a caller-given id also names the results hash (enqueue.lua deletes a
        # reused id's old record there); the common call with generated ids sends one key less.
        self._enqueue_keys_with_ids = (*self._enqueue_keys, k.results)
        self._window = self._window_ms()
        self._default_lease_ms = round(settings.lease * 1000)  # validated by QueueSettings

    # -- enqueue ----------------------------------------------------------------------------------
    def pack(
        self,
        task: str,
        payload: Any,
        job_id: str | None,
        delay: float,
        max_attempts: int | None,
        *,
        priority: int,
        time_limit: float | None = None,
        limit: Limit | None = None,
    ) -> tuple[Any, ...]:
        """One job, validated: id, task, payload, max attempts, options, then priority, time limit
        ms (0: none; the queue's ``time_limit`` when the job has none) and key limit ('': none).

        The first five are the job's ARGV group of enqueue.lua: options is '' for the common job
        (ready now, priority 0, no time limit, no key limit: each ARGV costs the server about 1k
        instructions), else '<delay ms>:<priority>:<time limit ms>:<key limit>'."""
        if task not in self._valid_tasks:
            self._valid_tasks.add(validate_name("task name", task))
        settings = self.settings
        if max_attempts is None:
            max_attempts = settings.max_attempts
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        if time_limit is None:
            time_limit = settings.time_limit
        data = encode_payload(settings.serializer, task, payload, settings.max_payload_bytes)
        delay_ms = 0 if delay == 0 and type(delay) is not bool else delay_ms_of(delay)
        level = check_priority(priority)
        limit_ms = 0 if time_limit is None else time_limit_ms(time_limit)
        keyed = "" if limit is None else packed_limit(limit)
        options = f"{delay_ms}:{level}:{limit_ms}:{keyed}" if delay_ms or level or limit_ms or keyed else ""
        return ("" if job_id is None else validate_job_id(job_id), task, data, max_attempts, options,
                level, limit_ms, keyed)  # fmt: skip

    def enqueue(self, specs: Iterable[JobSpec | tuple[str, Any]]) -> Call[list[Job]]:
        """Enqueue a batch; every spec is validated before anything is sent (nothing partial)."""
        batch = [s if isinstance(s, JobSpec) else spec_of(s) for s in specs]
        if not batch or len(batch) > MAX_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_BATCH} jobs, got {len(batch)}")
        pack = self.pack
        return self.enqueue_packed([
            pack(s.task, s.payload, s.job_id, s.delay, s.max_attempts,
                 priority=s.priority, time_limit=s.time_limit, limit=s.limit)
            for s in batch
        ])  # fmt: skip

    def enqueue_packed(self, groups: Sequence[tuple[Any, ...]]) -> Call[list[Job]]:
        """One enqueue call for already validated jobs (1..MAX_BATCH, see ``pack()``)."""
        args: list[Any] = [self._window]
        for group in groups:
            args += group[:5]
        serializer = self.settings.serializer
        keys = self._enqueue_keys_with_ids if any(group[0] for group in groups) else self._enqueue_keys
        return Call(_ENQUEUE, keys, args,
                    lambda reply: enqueued_jobs(groups, reply, serializer, self.owner))  # fmt: skip

    # -- claim / ack ------------------------------------------------------------------------------
    def claim(self, count: int, lease: float | None) -> Call[tuple[list[Job], float]]:
        """Claim up to ``count`` jobs; also returns seconds until the next delayed job is due (-1: none)."""
        check_count("count", count, 0, MAX_BATCH)
        k = self.keys
        return Call(
            Scripts.CLAIM.value,
            (k.meta, k.waiting, k.delayed, k.active, k.marker, k.jobs),
            (count, self._lease_ms(lease), self.settings.maintenance_batch),
            lambda r: (claimed_jobs(r, 2, self.settings.serializer), until_due(r[0], r[1])),
        )

    def _window_ms(self) -> int:
        """The deduplication window for the scripts: -1 = while retained (no window)."""
        window = self.settings.dedup_window
        return -1 if window is None else round(window * 1000)

    def _result_ttl_ms(self) -> int:
        """The result TTL for the scripts: 0 = results off (they write nothing extra)."""
        s = self.settings
        return max(1, round(s.result_ttl * 1000)) if s.store_results else 0

    def _result_keys(self) -> tuple[str, str, str]:
        return self.keys.events, self.keys.results, self.keys.result_index

    def _lease_ms(self, lease: float | None) -> int:
        if lease is None:
            return self._default_lease_ms
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not 0.05 <= lease <= MAX_SECONDS:
            raise ValueError(f"lease must be >= 0.05 s and at most {MAX_SECONDS:g} s, got {lease!r}")
        return round(lease * 1000)

    def ack(
        self,
        jobs: Sequence[Job],
        claim: int = 0,
        lease: float | None = None,
        *,
        request: tuple[str, int] | None = None,
        resend: bool = False,
        results: Sequence[bytes] | None = None,
    ) -> Call[tuple[list[int], list[Job], float]]:
        """Ack ``jobs`` and claim up to ``claim`` more: (statuses, claimed, seconds until next due).

        ``request`` = (worker id, sequence number) makes the call safe to re-send: a second call
        with the same pair and ``resend=True`` answers what the first did (see ack.lua) instead of
        claiming again. Only a re-sent call reads the server's record (the hot path writes it).
        ``results``: the success record of each job (``_results.encode_result``), stored when
        ``store_results`` is on (None there stores null for every job).
        """
        check_count("claim", claim, 0, MAX_BATCH)
        check_batch("ack", jobs)
        args: list[Any] = [
            self._lease_ms(lease),
            claim,
            self.settings.maintenance_batch,
            self.settings.keep_completed,
            "" if request is None else ("+" if resend else "") + str(request[1]),
            self._window,
            ttl := self._result_ttl_ms(),
            len(jobs),
        ]
        if ttl:
            values = [NULL_RECORD] * len(jobs) if results is None else results
            for job, value in zip(jobs, values, strict=True):
                args += (job.id, held_token(job), value)
        else:
            for job in jobs:
                args += (job.id, held_token(job))
        k = self.keys
        n = len(jobs)

        def parse(r: Any) -> tuple[list[int], list[Job], float]:
            return (
                [int(s) for s in r[:n]],
                claimed_jobs(r, n + 2, self.settings.serializer),
                until_due(r[n], r[n + 1]),
            )

        record = k.requests if request is None else k.request(request[0])
        keys = (k.meta, k.waiting, k.delayed, k.active, k.completed, k.marker, k.jobs, record, k.dedup)
        keys_with_results = (*keys, k.events, k.results, k.result_index)
        return Call(Scripts.ACK.value, keys_with_results, args, parse)

    # -- fail / extend / release ------------------------------------------------------------------
    def fail(
        self, job: Job, error: str | BaseException, retry: bool, started: bool = True, hold: bool = False
    ) -> Call[str]:
        """Record a failed attempt; the reply says 'retry', 'failed' or 'cancelled'. ``started``
        False: a worker stopped the attempt before a handler took it. ``hold``: the stopped handler
        still runs; a job of a key with a concurrency keeps its slot, held (``job._held_slot``
        names the hold) until ``hold`` ends it (see fail.lua)."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        # Sent as UTF-8: a lone surrogate (a path os.fsdecode made from bad bytes) failed to encode,
        # and the attempt was not recorded; escaped, the text still shows the byte.
        message = message.encode("utf-8", "backslashreplace").decode()
        delay = retry_delay_ms(self.settings.backoff, job.attempts, job.max_attempts, retry)
        k = self.keys

        def parse(r: Any) -> str:
            status = int(r[0])
            if status != 1:
                raise lease_error("fail", job, status)
            job.token, job.error = None, message[:MAX_ERROR_CHARS]
            job._held_slot = (text(r[3]) or None) if len(r) > 3 else None
            outcome = text(r[1])
            retried = "waiting" if delay == 0 else "delayed"  # a retry without delay is ready at once
            job.state = {"retry": retried, "failed": "failed"}.get(outcome, "cancelled")
            return outcome

        return Call(
            Scripts.FAIL.value,
            (
                k.meta,
                k.waiting,
                k.delayed,
                k.active,
                k.failed,
                k.marker,
                k.jobs,
                k.dedup,
                *self._result_keys(),
                k.cancelled,
                k.held_slots,
            ),
            (
                job.id,
                held_token(job),
                message[:MAX_ERROR_CHARS],
                delay,
                self.settings.keep_failed,
                self._window,
                self._result_ttl_ms(),
                self._default_lease_ms,
                1 if started else 0,
                self._default_lease_ms if hold else 0,
            ),
            parse,
        )

    def extend(self, jobs: Sequence[Job], lease: float | None) -> Call[list[int]]:
        args: list[Any] = [self._lease_ms(lease), len(check_batch("extend", jobs))]
        for job in jobs:
            args += (job.id, held_token(job))
        return Call(
            Scripts.EXTEND.value,
            (self.keys.active, self.keys.jobs),
            args,
            lambda r: [int(s) for s in r],
        )

    def release(self, jobs: Sequence[Job], started: Sequence[bool]) -> Call[list[int]]:
        args: list[Any] = [len(jobs), self.settings.keep_failed, self._window, self._result_ttl_ms()]
        for job, was_started in zip(jobs, started, strict=True):
            args += (job.id, held_token(job), 0 if was_started else 1)
        k = self.keys
        keys = (k.active, k.waiting, k.marker, k.jobs, k.dedup, *self._result_keys(), k.cancelled)
        return Call(
            Scripts.RELEASE.value,
            (*keys, k.meta, k.failed),
            args,
            lambda r: [int(s) for s in r],
        )

    def cancel(self, job_id: str) -> Call[bool]:
        validate_name("job id", job_id)
        k = self.keys
        return Call(
            Scripts.CANCEL.value,
            (k.waiting, k.delayed, k.jobs, *self._result_keys(), k.marker, k.dedup),
            (job_id, self._result_ttl_ms(), self._window_ms()),
            lambda r: int(r[0]) in (1, 2),  # 2: active, its worker is asked to stop it
        )

    # -- reads ------------------------------------------------------------------------------------
    def parse_counts(self, replies: Sequence[Any]) -> dict[str, int]:
        """The counts of ``QueueBase._queue_counts``' replies, once the layout version read with
        them is known: a queue of a newer layout is refused (SchemaVersionError) as by every
        script call, never counted with this layout's keys. Read, not set: counting a queue
        that does not exist writes nothing."""
        self.check_layout(replies[MAX_PRIORITY + 5][2])
        return queue_counts(replies)

    def parse_job(self, job_id: str, fields: dict[Any, Any]) -> Job | None:
        return stored_job(job_id, fields, self.settings.serializer, self.owner)

    def check_layout(self, stored: Any) -> None:
        if stored is not None and text(stored) != LAYOUT_VERSION:
            raise SchemaVersionError(
                f"queue {self.name!r} was written with data layout version {text(stored)}; this "
                f"Conveyor reads version {LAYOUT_VERSION}. Upgrade Conveyor or use another queue name."
            )


def delay_ms_of(delay: object) -> int:
    """A delay in seconds as whole ms, refused with its name unless a finite number >= 0."""
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < math.inf:
        raise ValueError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
    if delay > MAX_SECONDS:
        raise ValueError(f"delay must be at most {MAX_SECONDS:g} s, got {delay!r}")
    return round(delay * 1000)


def spec_of(item: object) -> JobSpec:
    """A job of ``enqueue_many`` given as a tuple (task, payload, ...): a string would be unpacked
    letter by letter into task, payload and id."""
    if not isinstance(item, tuple | list):
        raise TypeError(f"each job of a batch is a JobSpec or a (task, payload, ...) tuple, got {item!r}")
    return JobSpec(*item)


def packed_limit(limit: object) -> str:
    if not isinstance(limit, Limit):
        raise TypeError(f"limit must be a conveyor.Limit, got {limit!r}")
    return limit.packed()
