"""Job results, the pure part: records, events and the waiter registry shared by both twins.

With ``QueueSettings.store_results`` on, the script that finishes a job (ack, fail, recover) writes
its result record into the queue's results hash (see ``_lua/_lib_results.lua``) and adds an entry naming
it to the queue's events stream. A client waits for results without polling: at most one blocking
XREAD per queue and client serves all its waiters (``_result_wait.py``), and reads the records the
events name with read_results.lua (which hides expired records).

No waiter can miss its event: a waiter registers first, then reads, in one script call, the
stream's last id, the job's state and its record. If the job has not finished, its event comes
after that stream id, and the reader reads from no later than it (see ``Registry.start_from()``).
The stream is capped (``MAXLEN ~ 1000``): a reader that fell behind (a reconnect, a busy fleet)
may find the events after its position trimmed. It can tell: a read then returns a full batch,
since at least the cap's worth of entries follow its position. After a full batch it reads the
record of every job anyone waits for, not only the announced ones (``events_read``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._errors import (
    ConveyorError,
    JobCancelledError,
    JobFailedError,
    PayloadTooLargeError,
    QueueClosedError,
    SerializationError,
)
from ._keys import validate_name
from ._models import STATES, QueueSettings
from ._ops import NULL_RECORD, Call
from ._scripts import Scripts
from ._serialize import JSON, Serializer, decode_payload
from ._topology import is_cluster

W = TypeVar("W")
READ_BLOCK_MS = 1000  # an idle reader notices it has no waiters left within this
READ_COUNT = 500  # events per XREAD
READ_IDS = 1000  # ids per read_results.lua call (its bound)
UNFINISHED = frozenset({"w", "d", "a"})


SUCCESS = b"c:"  # a success record's head: state letter 'c', no attempts, ':'


def encode_result(settings: QueueSettings, task: str, value: Any) -> bytes:
    """The success record of a handler's return value, serialised like a payload and within
    ``max_result_bytes`` (built here, not in the ack script: Lua then stores it as it is).
    Worker hot path: one serializer call, no payload-error rewriting."""
    serializer = settings.serializer
    if value is None and serializer is JSON:
        return NULL_RECORD
    try:
        data = serializer.dumps(value)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"result of task {task!r} cannot be serialized ({type(value).__name__}): {exc}"
        ) from exc
    if len(data) > settings.max_result_bytes:
        raise PayloadTooLargeError(
            f"result of task {task!r} is {len(data)} bytes encoded; the limit is "
            f"{settings.max_result_bytes} bytes (QueueSettings.max_result_bytes)"
        )
    return SUCCESS + data


class PreparedResult:
    """A task's return value as its app's hook wrapper settled it, to run the hooks that fit the
    outcome: serialised (``data``), or refused (``error``: it cannot be stored, the attempt
    fails without a retry). The worker then stores it as it is (no second serialisation)."""

    __slots__ = ("data", "error")

    def __init__(self, data: bytes | None, error: ConveyorError | None) -> None:
        self.data, self.error = data, error


def prepare_result(settings: QueueSettings, task: str, value: Any) -> PreparedResult:
    try:
        return PreparedResult(encode_result(settings, task, value), None)
    except (SerializationError, PayloadTooLargeError) as exc:
        return PreparedResult(None, exc)


def result_values(settings: QueueSettings, job: Any, value: Any) -> list[bytes] | None:
    """The ack script's result argument for one job acked by hand (None: results off)."""
    return [encode_result(settings, job.task, value)] if settings.store_results else None


def results_off(queue: str) -> ConveyorError:
    return ConveyorError(
        f"queue {queue!r} does not store results: set QueueSettings(store_results=True) on its "
        "workers and on this client"
    )


def client_options(client: Any) -> dict[str, Any]:
    """The options a redis-py client's connections are made with: its pool's, or on a Cluster
    (no ``connection_pool``) ``get_connection_kwargs()``; empty for glide."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return getattr(pool, "connection_kwargs", {})
    if is_cluster(client):
        return client.get_connection_kwargs()  # type: ignore[no-any-return]
    return {}


def read_block_ms(client: Any) -> int:
    """How long the reader's XREAD blocks: READ_BLOCK_MS, or half the socket timeout of a
    redis-py client's pool when that is shorter. A block past the socket timeout (say
    socket_timeout=0.3) made every idle read raise TimeoutError: the reader logged 'lost the
    server' each time and never did its idle re-read, so a waiter whose job finished without a
    record waited out its whole timeout. (glide's reader has a connection of its own, timed
    for its block.) A Cluster client has no ``connection_pool``: its nodes' connections take the
    options of ``get_connection_kwargs()``; read there, else its block stayed 1 s whatever the
    socket timeout, with the failure above on every Cluster queue given a short one."""
    timeout = client_options(client).get("socket_timeout")
    if not isinstance(timeout, int | float) or timeout <= 0:
        return READ_BLOCK_MS
    return max(1, min(READ_BLOCK_MS, int(timeout * 500)))


def check_wait(job_id: str, timeout: float | None) -> str:
    validate_name("job id", job_id)
    # a str failed in a comparison (TypeError naming no argument), True waited 1 s
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise ValueError(f"timeout must be None or >= 0 seconds, got {timeout!r}")
    return job_id


def deadline_of(timeout: float | None) -> float | None:
    """When a wait of ``timeout`` seconds ends (monotonic clock); None: no limit, also past
    threading.TIMEOUT_MAX (292 years), where Event.wait raises OverflowError."""
    if timeout is None or timeout > threading.TIMEOUT_MAX:
        return None
    return time.monotonic() + timeout


def time_left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (0 once it passed; None: no limit). The wait for the result
    gets what the first read left of the timeout, not the whole timeout again."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def read_call(keys: Any, ids: list[str]) -> Call[list[Any]]:
    """One read_results.lua call (1..READ_IDS ids): the stream's last id, then each job's
    state and record (None: none, or expired)."""
    k = (keys.events, keys.jobs, keys.results, keys.legacy_results)
    return Call(Scripts.READ_RESULTS.value, k, (len(ids), *ids), list)


# A job found unfinished where a record was read (``record_calls``): its waiters keep waiting.
UNFINISHED_JOB = object()


def current_records(reply: list[Any]) -> list[Any]:
    """The records of a read_results.lua reply, in the order of its ids; a job that is waiting,
    delayed or active again (retried by ``retry_failed``, or its id used again by a new job) reads
    ``UNFINISHED_JOB``: a record it still has is its previous run's, not its result."""
    return [
        UNFINISHED_JOB if state is not None and _text(state) in UNFINISHED else record
        for state, record in zip(reply[1::2], reply[2::2], strict=True)
    ]


def record_calls(keys: Any, ids: list[str]) -> list[Call[list[Any]]]:
    """The read_results.lua calls that read the records of ``ids``; their replies' records
    (``current_records``) come in the order of ``ids``."""
    return [
        Call(call.script, call.keys, call.args, current_records)
        for call in (read_call(keys, ids[i : i + READ_IDS]) for i in range(0, len(ids), READ_IDS))
    ]


@dataclass(frozen=True, slots=True)
class Probe:
    """What the waiter's round trip found: a record to decode, or a stream id to wait after."""

    record: bytes | None
    wait_after: str | None


def read_probe(job_id: str, reply: list[Any]) -> Probe:
    """The waiter's one round trip, read_results.lua for ``job_id`` alone."""
    last, state, record = reply
    state = _text(state) if state is not None else None
    if state in UNFINISHED:
        return Probe(None, _text(last))
    if record is None:
        raise gone(job_id, state)
    return Probe(record_bytes(record), None)


def record_bytes(record: Any) -> bytes:
    """A result record as bytes: a client that decodes replies (decode_responses) gives text,
    which ``bytes()`` refused and ``decode_record`` could not read."""
    if isinstance(record, bytes):
        return record
    return record.encode() if isinstance(record, str) else bytes(record)


def gone(job_id: str, state: str | None) -> ConveyorError:
    where = "no such job" if state is None else f"the job is {STATES.get(state, state)}"
    # (no job: also one whose enqueue reached no replica before its primary failed over)
    lost = ", or it was never enqueued here (or a failover lost its enqueue)" if state is None else ""
    return ConveyorError(
        f"job {job_id!r} has no stored result ({where}): it expired (result_ttl), retention removed "
        f"it, or the job finished while store_results was off{lost}"
    )


def decode_record(serializer: Serializer, job_id: str, record: bytes | None) -> Any:
    """The return value a record holds; a failure record raises JobFailedError (or a subclass)."""
    if record is None:
        raise gone(job_id, None)
    record = record_bytes(record)
    state = record[:1].decode()
    colon = record.index(b":")
    if state == "c":
        return decode_payload(serializer, job_id, record[colon + 1 :])
    attempts = int(record[1:colon]) if colon > 1 else None
    error = record[colon + 1 :].decode(errors="replace")
    cls = JobFailedError if state == "f" else JobCancelledError
    raise cls(job_id, STATES.get(state, state), error, attempts)


def timed_out(job_id: str, timeout: float | None) -> TimeoutError:
    return TimeoutError(f"job {job_id!r} did not finish within {timeout} s")


def finished_ids(reply: Any) -> tuple[list[str], str | None]:
    """Job ids an XREAD reply announces, and the id of its last entry (None: no entries)."""
    ids: list[str] = []
    last = None
    for _stream, entries in _streams(reply):
        for entry_id, fields in entries:
            last = _text(entry_id)
            # redis-py may decode an entry's fields into a dict (field names are unique in one).
            flat = fields if isinstance(fields, list | tuple) else [x for kv in fields.items() for x in kv]
            for name, value in zip(flat[0::2], flat[1::2], strict=True):
                ids += _announced(_text(name), value)
    return ids, last


@dataclass(frozen=True, slots=True)
class EventsRead:
    """What one XREAD asks the reader to do: read the records of ``wanted``; of those, the ones
    in ``announced`` finished (a missing record means it expired), the others were only probed
    (no record: still running); then read on from ``last``."""

    wanted: list[str]
    announced: frozenset[str]
    last: str | None


def events_read(registry: Registry[Any], reply: Any, every: float) -> EventsRead:
    """The records to read after ``reply``: the announced jobs somebody waits for, and, after a
    full batch (the reader may be behind the stream's cap), every job somebody waits for. After
    a read that waited its block for nothing, and at least once per ``every`` seconds (the block)
    while events keep coming, every job somebody waits for too, a missing record settling it: a
    job finished by workers whose store_results is off is never announced, and its waiters would
    otherwise wait for ever (or, while other jobs kept finishing, until their timeout)."""
    ids, last = finished_ids(reply)
    quiet = last is None  # the read waited its block for nothing
    if registry.sweep_due(0.0 if quiet else every):
        everyone = list(registry.waiting)
        return EventsRead(everyone, frozenset(everyone), last)
    wanted = registry.wanted(ids)
    if sum(len(entries) for _stream, entries in _streams(reply)) >= READ_COUNT:
        named = set(wanted)
        wanted += [job_id for job_id in registry.waiting if job_id not in named]
    return EventsRead(wanted, frozenset(ids), last)


def settled(read: EventsRead, records: list[Any]) -> list[tuple[str, Any]]:
    """(job id, record) for each job of ``read`` that finished: announced, or probed and found;
    never one found unfinished (its waiters wait for the run to come)."""
    return [
        (job_id, record)
        for job_id, record in zip(read.wanted, records, strict=True)
        if record is not UNFINISHED_JOB and (record is not None or job_id in read.announced)
    ]


def _announced(name: str, value: Any) -> list[str]:
    """The job ids one event field names: field '{' + state letter, value the ids joined by '{'
    (see _lua/_lib_results.lua); or, as written before, the field is a job id (no id holds a '{')."""
    return _text(value).split("{") if name.startswith("{") else [name]


def _streams(reply: Any) -> list[Any]:
    """(stream, entries) pairs: RESP2 replies are [[stream, entries]]; redis-py's RESP3 replies
    are {stream: [entries]}."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [
            (name, entries[0] if entries and isinstance(entries[0], list) else entries)
            for name, entries in reply.items()
        ]
    return list(reply)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _stream_key(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass
class Registry(Generic[W]):
    """Waiters of one client and queue, and where its one reader reads from (no I/O here)."""

    waiting: dict[str, list[W]] = field(default_factory=dict)
    position: str | None = None
    running: bool = False
    swept: float = field(default_factory=time.monotonic)  # when the reader last read every waited job

    def add(self, job_id: str, waiter: W) -> None:
        self.waiting.setdefault(job_id, []).append(waiter)

    def remove(self, job_id: str, waiter: W) -> None:
        waiters = self.waiting.get(job_id, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self.waiting.pop(job_id, None)

    def start_from(self, stream_id: str) -> bool:
        """A waiter waits for events after ``stream_id``: read from there at the latest. Returns
        True when the caller must start the reader (none runs)."""
        if self.position is None or _stream_key(stream_id) < _stream_key(self.position):
            self.position = stream_id
        if self.running:
            return False
        self.running, self.swept = True, time.monotonic()  # its waiter has just read its job
        return True

    def sweep_due(self, every: float) -> bool:
        """Whether the reader reads every waited job now: ``every`` seconds after it last did
        (the time is then taken as the last)."""
        now = time.monotonic()
        if now - self.swept < every:
            return False
        self.swept = now
        return True

    def next_read(self) -> str | None:
        """Where the reader reads next; None: nobody waits, the reader stops."""
        if not self.waiting:
            self.running, self.position = False, None
            return None
        return self.position

    def advance(self, read_from: str, last: str | None) -> None:
        """The reader read up to ``last``; keep a position a new waiter lowered meanwhile."""
        if last is not None and self.position == read_from:
            self.position = last

    def wanted(self, ids: list[str]) -> list[str]:
        return list(dict.fromkeys(i for i in ids if i in self.waiting))

    def pop(self, job_id: str) -> list[W]:
        return self.waiting.pop(job_id, [])

    def drain(self) -> list[tuple[str, W]]:
        """Every waiter, removed (its queue is closing)."""
        out = [(job_id, w) for job_id, waiters in self.waiting.items() for w in waiters]
        self.waiting.clear()
        return out


def closed(queue: str, job_id: str) -> QueueClosedError:
    """A result wait ended by close() / aclose(): it changes nothing on the server."""
    return QueueClosedError(
        f"queue {queue!r} was closed while waiting for the result of job {job_id!r}", maybe_applied=False
    )
