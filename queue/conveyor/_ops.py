"""Sans-I/O core shared by Queue and AsyncQueue: builds script calls and parses their replies.

A :class:`Call` is everything needed to run one transition (script, KEYS, ARGV) plus the pure
function that turns the reply into a result. The sync and async clients only execute calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._errors import LeaseLostError, SchemaVersionError
from ._keys import QueueKeys, queue_keys, validate_job_id, validate_name
from ._models import (
    MAX_PRIORITY,
    STATES,
    Job,
    JobSpec,
    Limit,
    QueueSettings,
    check_priority,
    time_limit_ms,
)
from ._retry import retry_delay_ms
from ._scripts import Script, Scripts
from ._serialize import encode_payload

NULL_RECORD = b"c:null"  # the success record of None (as _results.encode_result builds it)

T_co = TypeVar("T_co", covariant=True)
_ENQUEUE = Scripts.ENQUEUE.value  # (an Enum member's .value is a descriptor call)
LAYOUT_VERSION = "1"
MAX_BATCH = 1000
MAX_ERROR_CHARS = 4096
CLAIM_FIELDS = 2  # a header and the payload per claimed job, as in _lua/_lib.lua
LEASE_STATUS = {
    0: "the token does not hold the lease (the job was redelivered or already settled)",
    -1: "the lease expired",  # no longer returned: a matching token is accepted even when late
    -2: "no such job",
    2: "a cancel was requested while it ran",  # the lease was renewed to settle it with
    3: "the attempt ran past its time limit (the lease is no longer renewed)",
}
# Why a worker stops a running attempt (Job.stop_reason), and the extend statuses that ask for it.
CANCEL, TIMEOUT = "cancel", "timeout"
STOP_STATUS = {2: CANCEL, 3: TIMEOUT}


@dataclass(slots=True)
class Call(Generic[T_co]):
    """One script invocation and how to read its reply (not frozen: built once per call, and a
    frozen dataclass pays object.__setattr__ per field)."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]
    parse: Callable[[Any], T_co]


def text(value: Any) -> str:
    """Reply element as str (replies are bytes unless the caller's client decodes them)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def raw(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def whole(number: str) -> int:
    """An integer a script wrote as text. Servers turn a script's numbers into text their own way
    (Redis and Valkey write ``1764748800123``); one that writes an exponent is still read right."""
    try:
        return int(number)
    except ValueError:
        return int(float(number))


def lease_error(action: str, job: Job, status: int) -> LeaseLostError:
    return LeaseLostError(f"{action} of job {job.id!r} refused: {LEASE_STATUS.get(status, status)}")


class QueueCore:
    """Pure logic of one queue: validation, argument packing and reply parsing."""

    def __init__(self, name: str, settings: QueueSettings) -> None:
        self.name = validate_name("queue", name)
        self.settings = settings
        self.keys: QueueKeys = queue_keys(settings.prefix, name)
        self._valid_tasks: set[str] = set()
        self.owner: Any = None  # the Queue or AsyncQueue using this core: jobs it returns wait through it
        # Per-call constants, computed once (settings are frozen): the hot path only packs.
        k = self.keys
        self._enqueue_keys = (k.meta, k.waiting, k.delayed, k.marker, k.jobs, k.completed, k.failed, k.dedup)
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
            self._valid_tasks.add(validate_name("task", task))
        settings = self.settings
        if max_attempts is None:
            max_attempts = settings.max_attempts
        if type(max_attempts) is not int or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0 seconds, got {delay!r}")
        if time_limit is None:
            time_limit = settings.time_limit
        data = encode_payload(settings.serializer, task, payload, settings.max_payload_bytes)
        delay_ms = round(delay * 1000) if delay else 0
        level = check_priority(priority)
        limit_ms = 0 if time_limit is None else time_limit_ms(time_limit)
        keyed = "" if limit is None else packed_limit(limit)
        options = f"{delay_ms}:{level}:{limit_ms}:{keyed}" if delay_ms or level or limit_ms or keyed else ""
        return ("" if job_id is None else validate_job_id(job_id), task, data, max_attempts, options,
                level, limit_ms, keyed)  # fmt: skip

    def enqueue(self, specs: Iterable[JobSpec | tuple[str, Any]]) -> Call[list[Job]]:
        """Enqueue a batch; every spec is validated before anything is sent (nothing partial)."""
        batch = [s if isinstance(s, JobSpec) else JobSpec(*s) for s in specs]
        if not batch or len(batch) > MAX_BATCH:
            raise ValueError(f"a batch holds 1..{MAX_BATCH} jobs, got {len(batch)}")
        pack = self.pack
        return self.enqueue_packed([
            pack(s.task, s.payload, s.job_id, s.delay, s.max_attempts,
                 priority=s.priority, time_limit=s.time_limit, limit=s.limit)
            for s in batch
        ])  # fmt: skip

    def enqueue_packed(self, groups: Sequence[tuple[Any, ...]]) -> Call[list[Job]]:
        """One enqueue call for already validated jobs (1..MAX_BATCH, see :meth:`pack`)."""
        args: list[Any] = [self._window]
        for group in groups:
            args += group[:5]
        return Call(_ENQUEUE, self._enqueue_keys, args, lambda reply: self._parse_enqueue(groups, reply))

    def _parse_enqueue(self, groups: Sequence[tuple[Any, ...]], reply: Any) -> list[Job]:
        """Jobs from the reply; a created job's fields come from its packed group (see pack)."""
        if isinstance(reply, (bytes, str)):  # every job created: 'now{id{state{id{state...'
            parts = (reply.decode() if isinstance(reply, bytes) else reply).split("{")
            now = int(parts[0]) / 1000
            return [self._created(g, parts[1 + 2 * i], parts[2 + 2 * i], now) for i, g in enumerate(groups)]
        now = int(reply[0]) / 1000
        jobs: list[Job] = []
        extra = 1 + 3 * len(groups)
        for i, g in enumerate(groups):
            job_id, state = reply[1 + 3 * i], reply[3 + 3 * i]
            if type(job_id) is bytes:
                job_id, state = job_id.decode(), state.decode()
            if reply[2 + 3 * i]:
                jobs.append(self._created(g, job_id, state, now))
                continue
            f = reply[extra : extra + 5]
            extra += 5
            job = Job(
                str(job_id),
                text(f[0]),
                STATES.get(state, state),
                raw(f[1]),
                int(f[2] or 0),
                int(f[3] or 1),
                int(f[4] or 0) / 1000,
                created=False,
                serializer=self.settings.serializer,
            )
            job._queue = self.owner
            jobs.append(job)
        return jobs

    def _created(self, g: tuple[Any, ...], job_id: str, state: str, now: float) -> Job:
        """The job this call created from its packed group ``g`` (see pack)."""
        job = Job(job_id, g[1], STATES[state], g[2], 0, g[3], now, serializer=self.settings.serializer)
        job.priority = g[5]
        if g[6]:
            job.time_limit = g[6] / 1000
        job._queue = self.owner
        return job

    # -- claim / ack ------------------------------------------------------------------------------
    def _parse_claimed(self, reply: Sequence[Any], start: int) -> list[Job]:
        """Jobs from a claim or ack reply: a header and the payload per job (claimed_entry in
        _lua/_lib.lua)."""
        serializer = self.settings.serializer
        jobs = []
        for i in range(start, len(reply), CLAIM_FIELDS):
            header, payload = reply[i], reply[i + 1]
            if type(header) is bytes:
                header = header.decode()
            else:  # a client that decodes replies (valkey-glide, decode_responses)
                header, payload = str(header), raw(payload)
            job_id, token, attempts, max_attempts, enqueued, limit, task = header.split("{", 6)
            jobs.append(
                Job(
                    job_id,
                    task,
                    "active",
                    payload,
                    whole(attempts),
                    whole(max_attempts),
                    whole(enqueued) / 1000,
                    token,
                    serializer=serializer,
                    time_limit=ms / 1000 if (ms := whole(limit)) else None,
                )
            )
        return jobs

    def claim(self, count: int, lease: float | None) -> Call[tuple[list[Job], float]]:
        """Claim up to ``count`` jobs; also returns seconds until the next delayed job is due (-1: none)."""
        if not 0 <= count <= MAX_BATCH:
            raise ValueError(f"count must be in 0..{MAX_BATCH}, got {count}")
        k = self.keys
        return Call(
            Scripts.CLAIM.value,
            (k.meta, k.waiting, k.delayed, k.active, k.marker, k.jobs),
            (count, self._lease_ms(lease), self.settings.maintenance_batch),
            lambda r: (self._parse_claimed(r, 2), until_due(r[0], r[1])),
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
        if lease < 0.05:
            raise ValueError(f"lease must be >= 0.05 s, got {lease!r}")
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
        if len(jobs) > MAX_BATCH or not 0 <= claim <= MAX_BATCH:
            raise ValueError(f"ack and claim counts must be <= {MAX_BATCH}")
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
            return [int(s) for s in r[:n]], self._parse_claimed(r, n + 2), until_due(r[n], r[n + 1])

        record = k.requests if request is None else k.request(request[0])
        keys = (k.meta, k.waiting, k.delayed, k.active, k.completed, k.marker, k.jobs, record, k.dedup)
        keys_with_results = (*keys, k.events, k.results, k.result_index)
        return Call(Scripts.ACK.value, keys_with_results, args, parse)

    # -- fail / extend / release ------------------------------------------------------------------
    def fail(self, job: Job, error: str | BaseException, retry: bool) -> Call[str]:
        """Record a failed attempt; the reply says 'retry' or 'failed'."""
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        delay = retry_delay_ms(self.settings.backoff, job.attempts, job.max_attempts, retry)
        k = self.keys

        def parse(r: Any) -> str:
            status = int(r[0])
            if status != 1:
                raise lease_error("fail", job, status)
            job.token, job.error = None, message[:MAX_ERROR_CHARS]
            outcome = text(r[1])
            job.state = {"retry": "delayed", "failed": "failed"}.get(outcome, "cancelled")
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
            ),
            (
                job.id,
                held_token(job),
                message[:MAX_ERROR_CHARS],
                delay,
                self.settings.keep_failed,
                self._window,
                self._result_ttl_ms(),
            ),
            parse,
        )

    def extend(self, jobs: Sequence[Job], lease: float | None) -> Call[list[int]]:
        args: list[Any] = [self._lease_ms(lease), len(jobs)]
        for job in jobs:
            args += (job.id, held_token(job))
        return Call(
            Scripts.EXTEND.value,
            (self.keys.active, self.keys.jobs),
            args,
            lambda r: [int(s) for s in r],
        )

    def release(self, jobs: Sequence[Job], started: Sequence[bool]) -> Call[list[int]]:
        args: list[Any] = [len(jobs)]
        for job, was_started in zip(jobs, started, strict=True):
            args += (job.id, held_token(job), 0 if was_started else 1)
        k = self.keys
        return Call(
            Scripts.RELEASE.value,
            (k.active, k.waiting, k.marker, k.jobs),
            args,
            lambda r: [int(s) for s in r],
        )

    # -- maintenance ------------------------------------------------------------------------------
    def _batch(self, batch: int | None) -> int:
        batch = self.settings.maintenance_batch if batch is None else batch
        if not 1 <= batch <= 100_000:
            raise ValueError(f"batch must be in 1..100000, got {batch}")
        return batch

    def promote(self, batch: int | None) -> Call[int]:
        k = self.keys
        return Call(
            Scripts.PROMOTE.value,
            (k.delayed, k.waiting, k.marker, k.jobs),
            (self._batch(batch),),
            lambda r: int(r[0]),
        )

    def recover(self, batch: int | None) -> Call[tuple[int, int]]:
        """(redelivered, ended): ended counts jobs that failed for lack of attempts or ended
        cancelled (a cancel was requested while their worker was gone)."""
        k = self.keys
        return Call(
            Scripts.RECOVER.value,
            (
                k.meta,
                k.waiting,
                k.active,
                k.failed,
                k.marker,
                k.jobs,
                k.dedup,
                *self._result_keys(),
                k.cancelled,
            ),
            (self._batch(batch), self.settings.keep_failed, self._window_ms(), self._result_ttl_ms()),
            lambda r: (int(r[0]), int(r[1]) + int(r[2])),
        )

    def trim(self, batch: int | None) -> Call[int]:
        s = self.settings
        ages = [-1 if a is None else round(a * 1000) for a in (s.completed_max_age, s.failed_max_age)]
        return Call(
            Scripts.TRIM.value,
            (
                self.keys.completed,
                self.keys.failed,
                self.keys.jobs,
                self.keys.dedup,
                self.keys.results,
                self.keys.cancelled,
                self.keys.result_index,
            ),
            (
                s.keep_completed,
                ages[0],
                s.keep_failed,
                ages[1],
                self._batch(batch),
                self._window_ms(),
                1 if s.store_results else 0,
            ),
            lambda r: sum(int(n) for n in r),
        )

    def cancel(self, job_id: str) -> Call[bool]:
        validate_name("job id", job_id)
        k = self.keys
        return Call(
            Scripts.CANCEL.value,
            (k.waiting, k.delayed, k.jobs, *self._result_keys()),
            (job_id, self._result_ttl_ms()),
            lambda r: int(r[0]) in (1, 2),  # 2: active, its worker is asked to stop it
        )

    # -- reads ------------------------------------------------------------------------------------
    def parse_counts(self, replies: Sequence[Any]) -> dict[str, int]:
        """Replies of QueueBase._queue_counts: one LLEN per priority level, then the sets."""
        levels = MAX_PRIORITY + 1
        names = ("delayed", "active", "completed", "failed")
        counts = {"waiting": sum(int(r) for r in replies[:levels])}
        counts.update(zip(names, (int(r) for r in replies[levels : levels + 4]), strict=True))
        totals = replies[levels + 4]
        counts["waiting"] += int(replies[levels + 6] or 0)  # parked at a limit key's concurrency
        counts["total_completed"] = int(totals[0] or 0)
        counts["total_failed"] = int(totals[1] or 0)
        counts["cancelled"] = int(replies[levels + 5])
        return counts

    def parse_job(self, job_id: str, fields: dict[Any, Any]) -> Job | None:
        if not fields:
            return None
        f = {text(key): value for key, value in fields.items()}
        job = Job(
            job_id,
            text(f.get("n", b"")),
            STATES.get(text(f.get("s", b"")), "unknown"),
            raw(f["d"]) if "d" in f else None,
            int(f.get("a", 0)),
            int(f.get("m", 1)),
            int(f.get("e", 0)) / 1000,
            None,  # the lease token stays with its holder: with it, anyone could ack the job
            text(f["r"]) if "r" in f else None,
            int(f["t"]) / 1000 if "t" in f else None,
            created=False,
        )
        job.serializer, job._queue = self.settings.serializer, self.owner
        job.priority = int(f.get("p", 0))
        if "x" in f:
            job.time_limit = int(f["x"]) / 1000
        return job

    def check_layout(self, stored: Any) -> None:
        if stored is not None and text(stored) != LAYOUT_VERSION:
            raise SchemaVersionError(
                f"queue {self.name!r} was written with data layout version {text(stored)}; this "
                f"Conveyor reads version {LAYOUT_VERSION}. Upgrade Conveyor or use another queue name."
            )


def packed_limit(limit: object) -> str:
    if not isinstance(limit, Limit):
        raise TypeError(f"limit must be a conveyor.Limit, got {limit!r}")
    return limit.packed()


def until_due(now_ms: Any, due_ms: Any) -> float:
    """Seconds from the server's now until the next delayed job is due; -1 when none is delayed."""
    due = int(due_ms)
    return -1.0 if due < 0 else max(0.0, (due - int(now_ms)) / 1000)


def held_token(job: Job) -> str:
    if job.token is None:
        raise LeaseLostError(f"job {job.id!r} is not leased by this client (it has no token)")
    return job.token


def check_statuses(action: str, jobs: Sequence[Job], statuses: Sequence[int]) -> None:
    """Raise LeaseLostError for the first refused job of a single-job API call."""
    for job, status in zip(jobs, statuses, strict=True):
        if status != 1:
            raise lease_error(action, job, status)


def settle_single(action: str, job: Job, statuses: Sequence[int], state: str) -> None:
    """After a one-job ack/extend: raise if refused, else update the local job. An extend that
    reports a cancel request renewed the lease: the job is marked (``job.cancelled``) instead."""
    if statuses[0] == 2:
        job.stop_reason = CANCEL
        return
    check_statuses(action, [job], statuses)
    if state:
        job.state, job.token = state, None
