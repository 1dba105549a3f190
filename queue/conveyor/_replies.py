"""Reading script replies: jobs out of enqueue, claim and stored-job replies, lease statuses.

Pure functions over what a client returned (bytes, or str from a client that decodes replies);
``_ops.QueueCore`` builds the calls whose ``parse`` step these are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import LeaseLostError
from ._models import MAX_PRIORITY, STATES, Job
from ._serialize import Serializer

CLAIM_FIELDS = 2  # a header and the payload per claimed job, as in _lua/_lib_claim.lua
# Per job an enqueue found existing (enqueue.lua): task, payload, attempts, max attempts, enqueued
# at, finished at, priority, time limit ms, last error ('' for a field the job has not).
EXISTING_FIELDS = 9
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


def enqueued_jobs(
    groups: Sequence[tuple[Any, ...]], reply: Any, serializer: Serializer, owner: Any
) -> list[Job]:
    """Jobs from an enqueue reply; a created job's fields come from its packed group
    (``QueueCore.pack``), an existing one's from the reply."""
    if isinstance(reply, (bytes, str)):  # every job created: 'now{id{state{id{state...'
        parts = (reply.decode() if isinstance(reply, bytes) else reply).split("{")
        now = int(parts[0]) / 1000
        return [created_job(g, parts[1 + 2 * i], parts[2 + 2 * i], now, serializer=serializer, owner=owner)
                for i, g in enumerate(groups)]  # fmt: skip
    now = int(reply[0]) / 1000
    jobs: list[Job] = []
    extra = 1 + 3 * len(groups)
    for i, g in enumerate(groups):
        job_id, state = reply[1 + 3 * i], reply[3 + 3 * i]
        if type(job_id) is bytes:
            job_id, state = job_id.decode(), state.decode()
        if reply[2 + 3 * i]:
            jobs.append(created_job(g, job_id, state, now, serializer=serializer, owner=owner))
            continue
        f = reply[extra : extra + EXISTING_FIELDS]
        extra += EXISTING_FIELDS
        jobs.append(existing_job(str(job_id), state, f, serializer, owner))
    return jobs


def existing_job(job_id: str, state: str, f: Sequence[Any], serializer: Serializer, owner: Any) -> Job:
    """The job an enqueue found under a caller-given id, with the fields ``stored_job`` reads too
    (``f``: EXISTING_FIELDS values; state x: deduplicated, its record is gone, nothing known)."""
    job = Job(
        job_id,
        text(f[0]),
        STATES.get(state, state),
        None if state == "x" else raw(f[1]),
        int(f[2] or 0),
        int(f[3] or 1),
        int(f[4] or 0) / 1000,
        None,
        text(f[8]) if f[8] else None,
        int(f[5]) / 1000 if f[5] else None,
        created=False,
        serializer=serializer,
    )
    job.priority = int(f[6] or 0)
    if f[7]:
        job.time_limit = int(f[7]) / 1000
    job._queue = owner
    return job


def created_job(
    g: tuple[Any, ...], job_id: str, state: str, now: float, *, serializer: Serializer, owner: Any
) -> Job:
    """The job an enqueue created from its packed group ``g`` (see ``QueueCore.pack``)."""
    job = Job(job_id, g[1], STATES[state], g[2], 0, g[3], now, serializer=serializer)
    job.priority = g[5]
    if g[6]:
        job.time_limit = g[6] / 1000
    job._queue = owner
    return job


def claimed_jobs(reply: Sequence[Any], start: int, serializer: Serializer) -> list[Job]:
    """Jobs from a claim or ack reply, from index ``start``: a header and the payload per job
    (claimed_entry in _lua/_lib_claim.lua)."""
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


def queue_counts(replies: Sequence[Any]) -> dict[str, int]:
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


def stored_job(job_id: str, fields: dict[Any, Any], serializer: Serializer, owner: Any) -> Job | None:
    """A job from its hash (HGETALL), without its lease token; None when there is none."""
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
    job.serializer, job._queue = serializer, owner
    job.priority = int(f.get("p", 0))
    if "x" in f:
        job.time_limit = int(f["x"]) / 1000
    return job


def lease_error(action: str, job: Job, status: int) -> LeaseLostError:
    return LeaseLostError(f"{action} of job {job.id!r} refused: {LEASE_STATUS.get(status, status)}")


def until_due(now_ms: Any, due_ms: Any) -> float:
    """Seconds from the server's now until the next delayed job is due; -1 when none is delayed,
    0 when jobs are ready now (a claim that popped only held-back jobs may leave some behind)."""
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
