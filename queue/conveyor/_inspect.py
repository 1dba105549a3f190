"""Sans-I/O helpers of the job-inspection and failed-job operations (list, retry, purge)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import ConveyorError
from ._keys import validate_name
from ._models import Job
from ._ops import MAX_BATCH, Call, QueueCore, check_count
from ._replies import text
from ._scripts import Scripts
from ._settings_checks import NO_LIMIT

LISTABLE = ("waiting", "delayed", "active", "completed", "failed", "cancelled")
MAX_OFFSET = 2**53  # past every job a queue can hold: a larger offset reads the same empty page


KEY_CHUNK = 100  # limit keys per step of a waiting page: bounds the server's time per call


class WaitingPage:
    """A page of waiting ids, read in steps whose server time is bounded (waiting_page.lua).

    First the ready lists; then, only while the page is not full and jobs are parked, the parked
    lists of limit keys, ``KEY_CHUNK`` keys per step in byte order: the keys that parked a job
    (``parked_keys``), then the other keys with running jobs (``running_keys``), where a release
    before that registry parked jobs without registering their key. Each registry is a hash the
    caller reads (HGETALL) when ``next()`` names it. The walk ends once it has passed as many
    parked jobs as the first step counted, so the second registry is read only when the first
    left some unaccounted for. Steps are not one snapshot: a job moving meanwhile may be missed
    or, read twice, is listed once."""

    def __init__(self, core: QueueCore, offset: int, limit: int) -> None:
        self.keys = core.keys
        self.skip, self.limit = offset, limit
        self.found: dict[str, None] = {}  # ids in order, each once
        self.parked = -1  # parked jobs the walk has not passed yet (-1: not counted yet)
        self.registries = [core.keys.parked_keys, core.keys.running_keys]  # still to read
        self.pending: list[str] = []  # limit keys still to read, in byte order
        self.walked: set[str] = set()

    @property
    def ids(self) -> list[str]:
        return list(self.found)

    def ready(self) -> Call[None]:
        """The first step: the ready lists (and how many jobs are parked)."""
        return self._step(())

    def next(self) -> Call[None] | str | None:
        """The next step: a script call, the key of a registry to read with HGETALL (give its
        reply to ``walk``), or None when the page is complete."""
        if len(self.found) >= self.limit or self.parked <= 0:
            return None
        if self.pending:
            chunk, self.pending = self.pending[:KEY_CHUNK], self.pending[KEY_CHUNK:]
            return self._step(chunk)
        return self.registries.pop(0) if self.registries else None

    def walk(self, registry: Any) -> None:
        """Walk the limit keys of ``registry`` (its HGETALL reply) not walked yet."""
        names = {text(name) for name in registry} - self.walked
        self.walked |= names
        self.pending = sorted(names, key=lambda name: name.encode())

    def _step(self, chunk: Sequence[str]) -> Call[None]:
        return Call(Scripts.WAITING_PAGE.value, (self.keys.waiting,),
                    (self.skip, self.limit - len(self.found), *chunk), self._take)  # fmt: skip

    def _take(self, reply: Sequence[Any]) -> None:
        self.skip = int(reply[0])
        self.parked = int(reply[1]) if self.parked < 0 else self.parked - int(reply[1])
        for job_id in reply[2:]:
            self.found.setdefault(text(job_id), None)


Page = tuple[str, str, int, int] | WaitingPage


def list_range(core: QueueCore, state: str, offset: int, limit: int) -> Page:
    """How to read ids of ``state`` in display order: waiting in claim order (script calls: the
    priority levels' lists, highest first, then parked jobs: ``WaitingPage``), else (command, key,
    start, stop): delayed and active by due time / lease deadline, completed, failed and
    cancelled newest first."""
    if state not in LISTABLE:
        raise ValueError(f"state must be one of {', '.join(LISTABLE)}, got {state!r}")
    offset = min(check_count("offset", offset, 0, NO_LIMIT), MAX_OFFSET)  # ZRANGE's stop must fit int64
    check_count("limit", limit, 1, MAX_BATCH)
    k = core.keys
    if state == "waiting":
        return WaitingPage(core, offset, limit)
    key = {"delayed": k.delayed, "active": k.active, "completed": k.completed, "failed": k.failed,
           "cancelled": k.cancelled}[state]  # fmt: skip
    command = "zrange" if state in ("delayed", "active") else "zrevrange"
    return command, key, offset, offset + limit - 1


def listed_ids(reply: Sequence[Any]) -> list[str]:
    return [text(i) for i in reply]


def listed_jobs(core: QueueCore, state: str, ids: Sequence[str], found: Sequence[Any]) -> list[Job]:
    """The jobs of a page (``found``: their hashes, read after the ids) still in ``state``: one
    that changed state in between (retried, claimed, finished) or is gone is left out."""
    jobs = (core.parse_job(job_id, fields) for job_id, fields in zip(ids, found, strict=True))
    return [job for job in jobs if job is not None and job.state == state]


def id_batches(job_ids: Sequence[str] | None, batch: int) -> list[list[str]] | None:
    """Caller-given ids split into script-sized batches, the last batch first (None: 'all failed
    jobs'): retry_failed puts each batch at the claim end, so the first ids given run first."""
    check_count("batch", batch, 1, MAX_BATCH)
    if job_ids is None:
        return None
    if isinstance(job_ids, str):
        raise TypeError("job_ids must be a sequence of ids, not one string")
    ids = list(dict.fromkeys(validate_name("job id", i) for i in job_ids))  # a repeat counts once
    return [ids[i : i + batch] for i in range(0, len(ids), batch)][::-1]


def retry_failed(core: QueueCore, ids: Sequence[str], batch: int) -> Call[int]:
    """One batch: the given failed ids, or (ids empty) the oldest ``batch`` failed jobs."""
    k = core.keys
    return Call(
        Scripts.RETRY_FAILED.value,
        (k.waiting, k.failed, k.marker, k.jobs, k.results),
        (len(ids), batch, *ids),
        lambda r: int(r[0]),
    )


def purge_failed(core: QueueCore, ids: Sequence[str], batch: int) -> Call[int]:
    """One batch: delete the given failed ids, or (ids empty) the oldest ``batch`` failed jobs."""
    k = core.keys
    keys = (k.failed, k.jobs, k.results)
    return Call(Scripts.PURGE_FAILED.value, keys, (len(ids), batch, *ids), int)


DONE = {retry_failed: "re-queued", purge_failed: "deleted"}


def batches_failed(exc: ConveyorError, build: Any, done: int) -> ConveyorError:
    """``exc``, raised by a later batch of retry_failed / purge_failed (``build``), its message
    extended with what the earlier batches did: each batch is atomic, but without this the caller
    could not tell whether any job had been re-queued or deleted. Extended in place (the same
    type, so an ``except ConnectionFailedError`` still catches it)."""
    if done:
        exc.args = (
            f"{exc} ({done} failed job(s) were already {DONE[build]} by earlier batches of this call,"
            " more if this batch ran before its reply was lost; those jobs are no longer failed,"
            " so the same call again skips them)",
        )
    return exc


def done_before_stop(build: Any, done: int, queue: str) -> str:
    """What retry_failed / purge_failed (``build``) had done when stopped between batches."""
    return (
        f"{done} failed job(s) of queue {queue} were already {DONE[build]} by the batches that "
        "completed (the batch in flight may have been applied too)"
    )


class BatchesInterrupted(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) during retry_failed / purge_failed, with what the batches whose
    reply came had done (``done`` jobs re-queued or deleted): the batch in flight may have run too.
    Still a KeyboardInterrupt, so code that catches one is unchanged; the CLI reports the count."""

    def __init__(self, build: Any, done: int, queue: str) -> None:
        self.done = done
        super().__init__(done_before_stop(build, done, queue))


class FailedBatches:
    """retry_failed / purge_failed without the I/O, run by Queue and AsyncQueue alike: the script
    call of each batch in turn (``next_call``), the count of what the batches whose reply came did
    (``done``), and how an error or a stop between batches reports it."""

    def __init__(self, core: QueueCore, build: Any, job_ids: Sequence[str] | None, batch: int) -> None:
        self.core, self.build, self.batch = core, build, batch
        self.batches = id_batches(job_ids, batch)  # None: every job failed at the start (``limit``)
        self.limit = 0
        self.done = 0
        self._sent = 0
        self._last: int | None = None

    def next_call(self) -> Call[int] | None:
        """The next batch's call; None once every batch ran (for 'all': ``limit`` jobs done, or a
        batch that found none, so jobs failing again meanwhile do not keep it going)."""
        if self.batches is not None:
            if self._sent == len(self.batches):
                return None
            ids, size = self.batches[self._sent], self.batch
        elif self.done >= self.limit or self._last == 0:
            return None
        else:
            ids, size = [], min(self.batch, self.limit - self.done)
        self._sent += 1
        return self.build(self.core, ids, size)  # type: ignore[no-any-return]

    def applied(self, count: int) -> None:
        self.done += count
        self._last = count

    def failed(self, exc: ConveyorError) -> ConveyorError:
        return batches_failed(exc, self.build, self.done)

    def interrupted(self) -> BatchesInterrupted:
        """Ctrl-C between batches (sync): a KeyboardInterrupt that carries the count."""
        return BatchesInterrupted(self.build, self.done, self.core.name)

    def cancelled(self, exc: BaseException) -> None:
        """A cancellation between batches (asyncio: a timeout, a shutdown) told the count, the
        CancelledError itself kept (re-raised as it is, so asyncio's bookkeeping of the task's
        cancellation and asyncio.timeout()'s TimeoutError are unchanged): a note, shown with its
        traceback, and ``batches_done``, for code that catches it (or a TimeoutError's cause)."""
        exc.batches_done = self.done  # type: ignore[attr-defined]
        exc.add_note(done_before_stop(self.build, self.done, self.core.name))
