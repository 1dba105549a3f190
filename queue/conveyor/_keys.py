"""The only place Conveyor builds key names.

Every key of a queue lives under one hash tag, ``<prefix>:{<queue>}:<kind>``, so a queue maps to one
Redis Cluster slot and one Dragonfly lock (``--lock_on_hashtags``). Job hashes are
``<prefix>:{<queue>}:j:<id>``; scripts derive them from the declared ``jobs`` key prefix, which shares
the hash tag, because a job's id is only known inside the script that pops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import InvalidNameError

FORBIDDEN_NAME_CHARS = frozenset("{}")
MAX_NAME_LENGTH = 200


def validate_name(kind: str, name: object) -> str:
    """Return ``name`` if it can be part of a key, else raise ``InvalidNameError`` naming it as
    ``kind`` ("queue name", "job id", ...)."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidNameError(f"{kind} must not be empty")
    if FORBIDDEN_NAME_CHARS & set(name):
        raise InvalidNameError(f"{kind} {name!r} must not contain '{{' or '}}' (hash tag characters)")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(f"{kind} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not name.isascii():
        # Names are sent as UTF-8: a lone surrogate (os.fsdecode of a bad byte, for example) used to
        # fail in the client's encoder, with an error naming no argument, and with automatic
        # batching it failed every concurrent caller sent in the same call.
        try:
            name.encode()
        except UnicodeEncodeError as exc:
            raise InvalidNameError(
                f"{kind} {name!r} is not valid Unicode text (lone surrogate at index {exc.start})"
            ) from None
    return name


def validate_job_id(job_id: object) -> str:
    """Caller-given ids: non-empty strings that are not all digits (digits are generated ids)."""
    validate_name("job id", job_id)
    assert isinstance(job_id, str)
    if job_id.isdigit():
        raise InvalidNameError(
            f"job id {job_id!r} is made only of digits; such ids are reserved for generated ids"
        )
    return job_id


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Key names of one queue."""

    meta: str  # hash: layout version, id and token counters, completed/failed totals
    waiting: str  # list: ids ready to run at priority level 0 (LPUSH to enqueue, RPOP to claim)
    delayed: str  # sorted set: id -> due time (ms)
    active: str  # sorted set: id -> lease deadline (ms)
    completed: str  # sorted set: id -> finish time (ms), retained jobs only
    failed: str  # sorted set: id -> finish time (ms)
    cancelled: str  # sorted set: id -> finish time (ms), jobs cancelled while active
    marker: str  # sorted set: wakes idle workers blocked in BZPOPMIN
    dedup: str  # sorted set: caller-given id -> finish time (ms), within the deduplication window
    schedules: str  # hash: periodic schedule name -> next fire time (ms)
    jobs: str  # prefix of job hashes (and of '<id>{o', a fail's record for a re-send: fail.lua)
    requests: str  # prefix of per-worker claim records (string, expires after one lease)
    events: str  # stream: finished job ids, capped (MAXLEN ~), read by result waiters (store_results)
    results: str  # hash: job id -> result record (store_results; see _lua/_lib_results.lua)
    result_index: str  # list: per call that stored results, '<expiry ms>{<id>{<id>...' (oldest first)
    legacy_results: str  # prefix of the string-per-job result records of 0.1 (read only)

    def job(self, job_id: str) -> str:
        """Key of one job hash."""
        return self.jobs + job_id

    @property
    def levels(self) -> str:
        """Sorted set of the priority levels above 0 that may hold jobs (scripts: levels_of)."""
        return self.waiting + ":l"

    @property
    def parked(self) -> str:
        """Count of jobs parked at their limit key's concurrency limit (scripts: <waiting>:pn).

        Scripts also derive, from the waiting key: <waiting>:g (``running_keys``),
        <waiting>:t:<limit key> (the key's earliest next start, ms, expiring when it passes) and
        <waiting>:p:<limit key> (list of the key's parked jobs of level 0), <waiting>:p<L>:<limit
        key> (those of level L > 0), <waiting>:pl:<limit key> (sorted set of those levels),
        <waiting>:pk (``parked_keys``) and <waiting>:gh:<limit key> (hash: the key's jobs holding
        a turn); see _lua/_lib_limits.lua."""
        return self.waiting + ":pn"

    @property
    def parked_keys(self) -> str:
        """Hash of the limit keys that may have parked jobs (key -> 1; scripts: <waiting>:pk)."""
        return self.waiting + ":pk"

    @property
    def held_slots(self) -> str:
        """Sorted set of the limit-key slots held for stopped handlers still running (a thread
        cannot be interrupted): member '<token>{<limit key>', score the hold's deadline (ms); see
        _lua/hold.lua."""
        return self.waiting + ":gz"

    @property
    def running_keys(self) -> str:
        """Hash: limit key -> its active jobs (scripts: <waiting>:g)."""
        return self.waiting + ":g"

    def level(self, priority: int) -> str:
        """The list of ready jobs at ``priority``: level 0 is the waiting list itself, level L > 0
        is ``<waiting>:<L>``. Scripts derive these from the declared waiting key, as they derive job
        keys from the jobs prefix (same hash tag, same slot)."""
        return self.waiting if priority == 0 else f"{self.waiting}:{priority}"

    def request(self, worker: str) -> str:
        """Key of one worker's record of its last ack+claim call (for re-sent calls)."""
        return self.requests + worker

    def legacy_result(self, job_id: str) -> str:
        """Key of one result record as 0.1 stored it (a string expiring on its own): still read
        (read_results.lua), never written."""
        return self.legacy_results + job_id

    def wake(self, waiter: str) -> str:
        """Sorted set that ends one shared wait over several markers early (see ``_waiter.py``);
        it lives a few seconds at most."""
        return f"{self.marker}:w:{waiter}"


def queue_keys(prefix: str, queue: str) -> QueueKeys:
    """Build the keys of ``queue`` under ``prefix``."""
    validate_name("prefix", prefix)
    validate_name("queue name", queue)
    base = f"{prefix}:{{{queue}}}:"
    return QueueKeys(
        meta=base + "meta",
        waiting=base + "w",
        delayed=base + "d",
        active=base + "a",
        completed=base + "c",
        failed=base + "f",
        cancelled=base + "x",
        marker=base + "m",
        dedup=base + "u",
        schedules=base + "cron",
        jobs=base + "j:",
        requests=base + "rc:",
        events=base + "ev",
        results=base + "rs",
        result_index=base + "ri",
        legacy_results=base + "r:",
    )
