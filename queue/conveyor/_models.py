"""Value types of the public API: settings, job specs and jobs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ._errors import ConveyorError
from ._keys import validate_name
from ._retry import Backoff
from ._serialize import JSON, Serializer, decode_payload
from ._settings_checks import MAX_SECONDS, finite, settings_problems

STATES = {
    "w": "waiting",
    "d": "delayed",
    "a": "active",
    "c": "completed",
    "f": "failed",
    "C": "cancelled",  # cancelled while active (a waiting or delayed job is removed instead)
    "x": "finished",  # finished inside the deduplication window; its record is gone (payload None)
}
_UNSET: Any = object()
MAX_PRIORITY = 9  # levels 0 (default) .. 9; a higher level is claimed first


def check_priority(priority: object) -> int:
    """Return ``priority`` if it is a level Conveyor has, else raise ValueError naming it."""
    if type(priority) is not int or not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(
            f"priority must be an int in 0..{MAX_PRIORITY} (higher runs first), got {priority!r}"
        )
    return priority


def is_time_limit(value: object) -> bool:
    """A time limit is a finite number of seconds > 0."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


def time_limit_ms(limit: float | None) -> int:
    """A job's time limit for the scripts, in ms (0 = none); bad values raise, naming the value."""
    if limit is None:
        return 0
    if not is_time_limit(limit):
        raise ValueError(f"time_limit must be a number of seconds > 0, got {limit!r}")
    if limit > MAX_SECONDS:
        raise ValueError(f"time_limit must be at most {MAX_SECONDS:g} s, got {limit!r}")
    return max(1, round(limit * 1000))


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Everything a queue and its workers are configured with. Times are in seconds.

    prefix: the first part of every key of the queue (``<prefix>:{<queue>}:...``).
    lease: how long a claimed job stays leased to its worker, renewed every lease/3 while its
    handler runs; an expired lease is recovered (the job redelivered, or failed on its last attempt).
    max_attempts: attempts of a job that sets none; backoff: the delay before each retry.
    max_payload_bytes: the largest encoded payload (PayloadTooLargeError above it).
    serializer: encodes payloads and results (JSON by default); any other is refused with a client
    built with decode_responses=True, which fails to read payloads that are not UTF-8 text.
    maintenance_interval / maintenance_batch: a worker's sweep (promote due delayed jobs, recover
    expired leases, apply retention) runs this often, each script call handling at most this many.
    pool_size / pool_timeout: connections per server of a queue's pool, and how long a call waits
    for a free one (PoolExhaustedError); socket_timeout / connect_timeout: how long a call waits for
    the server's reply, and for a new connection (ConnectionFailedError). protocol: RESP 2 or 3.
    dedup_window: seconds a caller-given job_id keeps deduplicating after its job finished (None:
    while the finished job is retained).
    keep_completed / keep_failed: how many finished jobs to retain (-1 keeps all, 0 none);
    completed_max_age / failed_max_age: also drop finished jobs older than this (None: no age limit).
    strict: raise instead of warn when the server's maxmemory-policy is not noeviction.
    wait_replicas: after each enqueue, ack and fail, wait (WAIT) until this many replicas hold the
    write, up to wait_timeout (shorter than socket_timeout); fewer raise ReplicationError. 0
    (default): do not wait.
    store_results: workers store each handler's return value (serialised with ``serializer``, at
    most max_result_bytes) and each final failure's error, and announce finished jobs, so
    ``job.result()`` can wait for them; off (the default), acks write nothing extra. A result is
    kept for result_ttl seconds (checked when read; trim deletes expired ones), and goes earlier
    with its job when retention removes it.
    batch_enqueue: concurrent ``enqueue`` calls (tasks or threads) that arrive while one is in flight
    go out together as one script call when it returns (or at once, as a second call in flight, when
    at least as many wait as it carries); a lone caller is sent at once, as without.
    On by default: a lone caller pays no round trip or timer for it (one flag check and a lock).
    time_limit: hard limit of one attempt, from its claim, for jobs enqueued through this queue
    without their own (None: no limit). See "Time limits" on the production page: an asyncio
    handler is cancelled at the limit; a thread is not interrupted (``Job.cancelled`` tells it).
    driver: the client library ``from_url`` builds: "redis-py" (default, hiredis when installed) or
    "glide" (valkey-glide, the ``glide`` extra: one server, no pool; see the Runtimes page).
    """

    prefix: str = "cv"
    lease: float = 30.0
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    max_payload_bytes: int = 512 * 1024
    keep_completed: int = 0
    keep_failed: int = 10_000
    completed_max_age: float | None = None
    failed_max_age: float | None = 7 * 24 * 3600.0
    maintenance_batch: int = 100
    maintenance_interval: float = 1.0
    serializer: Serializer = JSON
    strict: bool = False
    pool_size: int = 16
    pool_timeout: float = 5.0
    socket_timeout: float = 10.0
    connect_timeout: float = 5.0
    protocol: int = 3
    dedup_window: float | None = None
    wait_replicas: int = 0
    wait_timeout: float = 1.0
    batch_enqueue: bool = True
    store_results: bool = False
    result_ttl: float = 24 * 3600.0
    max_result_bytes: int = 64 * 1024
    time_limit: float | None = None
    driver: str = "redis-py"

    def __post_init__(self) -> None:
        failed = settings_problems(self)
        if failed:
            raise ValueError("invalid QueueSettings: " + "; ".join(failed))


@dataclass(frozen=True, slots=True)
class Limit:
    """Per-key limits, enforced when a job is claimed: at most ``concurrency`` jobs of ``key`` active
    at once, and/or at most ``rate`` starts of ``key`` per second (evenly spaced, no burst).

    A job over the concurrency limit is parked until a job of its key finishes, fails, is released
    or has its lease recovered (a job settled while its stopped thread runs on frees its slot only
    when the thread returns); a job over the rate waits in the delayed set for its reserved start.
    Each job carries its own limit, so every job of one key should carry the same one.
    """

    key: str
    concurrency: int | None = None
    rate: float | None = None

    def __post_init__(self) -> None:
        validate_name("limit key", self.key)
        if self.concurrency is None and self.rate is None:
            raise ValueError(f"limit {self.key!r} needs a concurrency, a rate or both")
        if self.concurrency is not None and (type(self.concurrency) is not int or self.concurrency < 1):
            raise ValueError(f"limit {self.key!r}: concurrency must be an int >= 1, got {self.concurrency!r}")
        rate = self.rate
        # At least one start per MAX_SECONDS: a smaller rate's interval overflows (1e-320 gave inf).
        # A huge int (10**400) raised OverflowError in isfinite: only a float-sized one is a rate.
        if rate is not None and (
            type(rate) not in (int, float) or not finite(rate) or not rate >= 1 / MAX_SECONDS
        ):
            raise ValueError(
                f"limit {self.key!r}: rate must be at least {1 / MAX_SECONDS:g} jobs per second "
                f"(one start per {MAX_SECONDS:g} s), got {rate!r}"
            )

    def packed(self) -> str:
        """The enqueue script's limit argument: '<concurrency>:<ms between starts>:<key>'."""
        concurrency = "" if self.concurrency is None else str(self.concurrency)
        interval = "" if self.rate is None else repr(1000.0 / self.rate)
        return f"{concurrency}:{interval}:{self.key}"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job to enqueue. ``job_id`` makes the enqueue idempotent; ``delay`` is in seconds;
    ``priority`` is a level in 0..9 (default 0), higher levels are claimed first; ``limit`` caps
    how many jobs of its key run at once and how often they start ([Limit][conveyor.Limit])."""

    task: str
    payload: Any = None
    job_id: str | None = None
    delay: float = 0.0
    max_attempts: int | None = None
    priority: int = 0
    time_limit: float | None = None
    limit: Limit | None = None


@dataclass(slots=True, eq=False)
class Job:
    """A job as stored on the server: ``id``, ``task``, ``priority`` (0..9), ``attempts`` made of
    ``max_attempts``, ``error`` (the last failed attempt's text), ``enqueued_at`` and
    ``finished_at`` (Unix times in seconds, the server's clock), ``raw_payload`` (the stored bytes;
    ``payload`` decodes them with ``serializer``). ``created``: False when an enqueue found an
    existing job of its ``job_id`` and returned it instead of creating one.

    ``state``: ``waiting``, ``delayed``, ``active``, ``completed``, ``failed`` or ``cancelled``;
    or ``finished``, for the job an enqueue found by its id within the deduplication window after
    its record was removed: nothing else is known of it then (``task`` empty, ``payload`` None).

    ``token`` is the lease token of the attempt this client
    claimed: an ack or a fail clears it (and sets ``state``); after a release it stays, and the
    server refuses it from then on (LeaseLostError).

    ``time_limit``: seconds one attempt may run (None: no limit). ``stop_reason``: set by the
    worker running the job when it wants the handler to stop (``"cancel"`` or ``"timeout"``);
    a sync handler cannot be interrupted and should check [cancelled][conveyor.Job.cancelled] between steps.
    """

    id: str
    task: str
    state: str
    raw_payload: bytes | None = None
    attempts: int = 0
    max_attempts: int = 1
    enqueued_at: float | None = None
    token: str | None = None
    error: str | None = None
    finished_at: float | None = None
    created: bool = True
    serializer: Serializer = field(default=JSON, repr=False)
    _payload: Any = field(default=_UNSET, repr=False)
    # Known from enqueue, get_job and jobs(); a claimed job leaves it at 0 (not sent on claims).
    priority: int = 0
    # The Queue or AsyncQueue that returned it; the name of the queue, for a job enqueue_many_to sent
    # to another queue (no client of it there).
    _queue: Any = field(default=None, repr=False)
    time_limit: float | None = None
    stop_reason: str | None = field(default=None, repr=False)
    # Whether an app's sync task's thread runs this attempt now (set by _hooks: False while the
    # call waits for an executor thread, True while the thread runs it); None when not known.
    _thread_running: bool | None = field(default=None, repr=False)
    # Set by _hooks when a stopped attempt is taken for never run (no thread had taken its call):
    # a thread that takes the call after that drops it, else the job ran beside its retry.
    _call_dropped: bool = field(default=False, repr=False)
    # Set by _hooks once this attempt's task returned: its outcome is success, so its time limit
    # passing while its after hooks run no longer fails it (Worker._stop_jobs, AsyncWorker._slot),
    # nor does a cancel learnt then (Dispatcher.stop).
    _returned: bool = field(default=False, repr=False)
    # Set by a sync Worker's hook wrapper once the return value settled the attempt, before its
    # after (or, a value that cannot be stored, failure) hooks: (what the handler will return,). A
    # thread still in them at the shutdown deadline is settled with it (Dispatcher.settle_returned).
    _return_value: tuple[Any] | None = field(default=None, repr=False)
    # Set by a worker's fail that held this attempt's limit-key slot for its handler still running
    # (a stopped thread): the hold's member, renewed and ended by the worker (_lua/hold.lua).
    _held_slot: str | None = field(default=None, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the worker asked this attempt to stop: the job was cancelled while it ran, or
        its time limit passed. The job is already settled; whatever the handler does after this
        is discarded."""
        return self.stop_reason is not None

    @property
    def payload(self) -> Any:
        """The decoded payload (decoded once, on first access)."""
        if self._payload is _UNSET:
            self._payload = (
                None
                if self.raw_payload is None
                else decode_payload(self.serializer, self.id, self.raw_payload)
            )
        return self._payload

    def result(self, timeout: float | None = None) -> Any:
        """The job's return value, once it finished; waits up to ``timeout`` seconds (None: no limit).

        From a [Queue][conveyor.Queue] this blocks; from an [AsyncQueue][conveyor.AsyncQueue] it
        returns an awaitable (``await job.result(timeout=5)``). See
        [Queue.result()][conveyor.Queue.result] for what it raises.
        """
        if self._queue is None or isinstance(self._queue, str):
            # A job built by hand, or one enqueue_many_to sent to another queue (_queue is that
            # queue's name): the sending queue's result() would wait for its own job of this id.
            of = "its queue" if self._queue is None else f"queue {self._queue!r}"
            raise ConveyorError(
                f"job {self.id!r} has no client of {of} to wait with: use queue.result(job_id) on a "
                f"client of {of} (ids are per queue)"
            )
        return self._queue.result(self.id, timeout)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, task={self.task!r}, state={self.state!r}, attempts={self.attempts})"
