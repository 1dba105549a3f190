"""The chaos run's producer: the seeded jobs it makes (kinds, limits, levels, delays, time
limits), how it enqueues them (batches and singles, re-sent on transient errors, each chunk
re-enqueued once), the jobs it cancels, and the `Plan` that records all of it for the verdict."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from _job_ends import FAILING
from conveyor import ConveyorError, JobSpec, Limit, Queue

if TYPE_CHECKING:
    from _chaos import ChaosConfig

TRANSIENT = (ConveyorError, redis.RedisError, OSError)
OVERTIME_LIMIT = 0.3  # seconds: the time limit of "overtime" jobs, which run longer


@dataclass(frozen=True)
class Cancel:
    """A cancel the producer made: its answer (None when a transient error made it re-send the
    call, so the first send may have cancelled it already) and the wall time it returned."""

    answer: bool | None
    at: float


@dataclass
class Plan:
    """The jobs produced so far: id -> (kind, ms), and what the producer observed."""

    kinds: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # id -> limit key, for limited jobs
    cancels: dict[str, Cancel] = field(default_factory=dict)  # id -> the producer's cancel of it
    enqueued: set[str] = field(default_factory=set)
    reenqueue_created: list[str] = field(default_factory=list)
    failed_calls: int = 0
    gave_up: list[str] = field(default_factory=list)


def make_job(rng: random.Random, cfg: ChaosConfig, index: int) -> tuple[JobSpec, str]:
    roll = rng.random()
    kind = "doomed" if roll < 0.05 else "flaky" if roll < 0.15 else "overtime" if roll < 0.18 else "ok"
    if kind == "overtime" and cfg.keep_completed != -1:
        kind = "ok"  # the soak keeps too few jobs to read how each overtime job ended
    size = rng.random()
    if size < 1 - cfg.over_lease_share - 0.45:
        ms = rng.randint(0, 20)
    elif size < 1 - cfg.over_lease_share - 0.15:
        ms = rng.randint(20, 300)
    elif size < 1 - cfg.over_lease_share - 0.05:
        ms = rng.randint(300, 1500)
    elif size < 1 - cfg.over_lease_share:
        ms = rng.randint(1500, int(cfg.lease * 900))
    else:  # over the lease: only heartbeats keep it
        ms = int(cfg.lease * 1000) + rng.randint(500, 1500)
    job_id = f"chaos-{cfg.seed}-{index}"
    options: dict[str, Any] = {}
    if kind == "overtime":  # runs 1.5 to 2.5 s under a 0.3 s time limit: 2 to 4 worker ticks over
        ms, options["time_limit"] = 1500 + ms % 1001, OVERTIME_LIMIT
    payload: dict[str, Any] = {"ms": ms, "kind": kind}
    # Limits, levels and delays ride the same faults: a slot a crashed or cut-off worker held must
    # come back, a parked job must be released, a delayed one promoted, whatever fault hits when.
    if rng.random() < cfg.limited_share:
        key = f"chaos-key-{rng.randrange(cfg.limit_keys)}"
        payload["key"] = key
        options["limit"] = Limit(key, concurrency=cfg.key_concurrency)
    if rng.random() < 0.3:
        options["priority"] = rng.randint(0, 9)
    if rng.random() < 0.1:
        options["delay"] = round(rng.uniform(0.05, 2.0), 3)
    return JobSpec("chaos", payload, job_id=job_id,
                   max_attempts=2 if kind in FAILING else None, **options), kind  # fmt: skip


def retrying(call: Callable[[], Any], plan: Plan, deadline: float) -> Any:
    """Call until it succeeds: every enqueue has caller-given ids, so a re-sent call is harmless."""
    while True:
        try:
            return call()
        except TRANSIENT:
            plan.failed_calls += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def send(q: Queue, specs: list[JobSpec], rng: random.Random, plan: Plan) -> list[Any]:
    """One enqueue_many, or one enqueue per job (the producer uses both)."""
    deadline = time.monotonic() + 60
    if len(specs) > 1 and rng.random() < 0.5:
        return list(retrying(lambda: q.enqueue_many(specs), plan, deadline))
    return [
        retrying(lambda s=s: q.enqueue(s.task, s.payload, job_id=s.job_id, max_attempts=s.max_attempts,
                                       delay=s.delay, priority=s.priority, limit=s.limit,
                                       time_limit=s.time_limit),
                 plan, deadline)
        for s in specs
    ]  # fmt: skip


def produce(q: Queue, cfg: ChaosConfig, plan: Plan, until: float, stop: threading.Event) -> None:
    """Enqueue in chunks (batches and singles); after each chunk re-enqueue the previous one."""
    rng = random.Random(cfg.seed * 1_000_003)
    chooser = random.Random(cfg.seed * 7_919)  # apart, so the jobs made stay those of the seed
    index, previous = 0, []
    per_job = (until - time.monotonic()) / cfg.jobs if cfg.jobs else 1 / cfg.rate
    while not stop.is_set():
        done = index >= cfg.jobs if cfg.jobs is not None else time.monotonic() >= until
        if done:
            break
        if cfg.jobs is None and backlogged(q, cfg.backlog):
            time.sleep(0.2)
            continue
        limit = cfg.jobs - index if cfg.jobs is not None else 50
        chunk = [make_job(rng, cfg, index + i) for i in range(min(limit, rng.randint(1, 16)))]
        index += len(chunk)
        specs = [spec for spec, _ in chunk]
        try:
            send(q, specs, rng, plan)
        except TRANSIENT as exc:
            plan.gave_up += [f"{s.job_id}: {exc!r}" for s in specs]
            continue
        for spec, kind in chunk:
            plan.kinds[str(spec.job_id)] = kind
            if spec.limit is not None:
                plan.keys[str(spec.job_id)] = spec.limit.key
            plan.enqueued.add(str(spec.job_id))
        plan.reenqueue_created += reenqueue(q, previous, rng, plan)
        cancel_some(q, cfg, plan, chooser, [str(spec.job_id) for spec in specs])
        # A job cancel() removed leaves no id behind without a dedup window (production.md): sent
        # again, it would be a new job, so the producer re-sends only the others.
        previous = [spec for spec in specs if spec.job_id not in plan.cancels]
        time.sleep(per_job * len(chunk) * (2 * rng.random() if cfg.jobs else 1))
    plan.reenqueue_created += reenqueue(q, previous, rng, plan)


def cancel_some(q: Queue, cfg: ChaosConfig, plan: Plan, chooser: random.Random, ids: list[str]) -> None:
    """Cancel each of the chunk's jobs with probability `cancel_share`, after a short wait that
    finds it waiting, parked at its key's limit, delayed or already running, and now and then a
    job enqueued earlier (running, or finished: the cancel must then say False). Only where every
    job is kept (not the soak): the verdict reads how each cancelled job ended."""
    if cfg.keep_completed != -1:
        return
    chosen = [i for i in ids if chooser.random() < cfg.cancel_share]
    earlier = sorted(plan.enqueued - set(ids) - set(plan.cancels))  # often running or finished
    if earlier and chooser.random() < cfg.cancel_share * len(ids):
        chosen.append(chooser.choice(earlier))
    for job_id in chosen:
        time.sleep(chooser.uniform(0, 0.5))
        before = plan.failed_calls
        try:
            answer = retrying(lambda i=job_id: q.cancel(i), plan, time.monotonic() + 60)
        except TRANSIENT as exc:
            plan.gave_up.append(f"cancel {job_id}: {exc!r}")
            answer = None
        plan.cancels[job_id] = Cancel(answer if plan.failed_calls == before else None, time.time())


def backlogged(q: Queue, limit: int) -> bool:
    """True while more than `limit` jobs wait (or the server cannot say): the soak then holds off,
    so its length measures time under faults, not a backlog the workers never catch up with."""
    try:
        return q.counts()["waiting"] > limit
    except TRANSIENT:
        return True


def reenqueue(q: Queue, specs: list[JobSpec], rng: random.Random, plan: Plan) -> list[str]:
    if not specs:
        return []
    try:
        return [job.id for job in send(q, specs, rng, plan) if job.created]
    except TRANSIENT as exc:
        plan.gave_up += [f"re-enqueue {s.job_id}: {exc!r}" for s in specs]
        return []
