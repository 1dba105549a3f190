"""The chaos run: worker processes behind a cuttable proxy, a producer, and seeded faults.

`run_chaos(server, config, workdir)` drives one run against a server started with AOF on and
returns a `Verdict` (see _verdict.py) with the figures and every problem found. Everything random
comes from one `random.Random(config.seed)`, so a failing seed can be replayed (timing still varies).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
from _fleet import Fleet
from _proxy import TcpProxy
from _verdict import FAILING, Verdict, judge, sample_memory
from conveyor import Backoff, ConveyorError, JobSpec, Limit, Queue

from bench.servers import RunningServer

FAULTS = ("kill", "cut", "term", "partition", "pause", "restart", "freeze")
FAULT_COUNTS = {"kill": 3, "cut": 2, "term": 2, "partition": 1, "pause": 2, "restart": 1, "freeze": 1}
TRANSIENT = (ConveyorError, redis.RedisError, OSError)
OVERTIME_LIMIT = 0.3  # seconds: the time limit of "overtime" jobs, which run longer


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 7
    jobs: int | None = 400  # None: produce until `seconds` have passed (soak)
    seconds: float = 0.0  # soak length; CI runs are sized by `faults` instead
    faults: dict[str, int] = field(default_factory=lambda: dict(FAULT_COUNTS))
    disabled_faults: tuple[str, ...] = ()  # fault classes switched off, reported in the summary
    fault_gap: float = 3.0  # seconds between faults
    sync_workers: int = 2
    async_workers: int = 2
    sync_concurrency: int = 4
    async_concurrency: int = 8
    lease: float = 5.0
    socket_timeout: float = 1.0
    pause: float = 2.0  # CLIENT PAUSE length: longer than the socket timeout
    shutdown_timeout: float = 10.0  # longer than the longest handler: a SIGTERM loses no run
    exit_grace: float = 5.0  # process start-up/exit slack on a loaded machine
    over_lease_share: float = 0.03
    limited_share: float = 0.25  # jobs under a concurrency limit, on one of `limit_keys` keys
    limit_keys: int = 3
    cancel_share: float = 0.05  # jobs the producer cancels soon after enqueueing them
    key_concurrency: int = 2
    keep_completed: int = -1  # soak: bounded, so memory can stay flat
    keep_failed: int = 5_000
    rate: float = 15.0  # soak: jobs per second at most...
    backlog: int = 150  # ...and no more while this many jobs wait (a loaded machine runs fewer)
    drain_timeout: float = 90.0

    def worker_settings(self) -> dict[str, Any]:
        return {
            "queue": {
                "lease": self.lease, "socket_timeout": self.socket_timeout, "connect_timeout": 1.0,
                "max_attempts": 6, "keep_completed": self.keep_completed, "keep_failed": self.keep_failed,
                "maintenance_interval": 0.5, "backoff": {"base": 0.2, "cap": 1.0, "jitter": 0.5},
                # results where every job is kept (the soak checks memory stays flat: none there)
                "store_results": self.keep_completed == -1, "result_ttl": 3600.0,
            },
            "worker": {"shutdown_timeout": self.shutdown_timeout, "block_timeout": 1.0},
        }  # fmt: skip

    def capacity(self, mode: str) -> int:
        return self.sync_concurrency if mode == "sync" else self.async_concurrency


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


class Faults:
    """Injects one fault at a time and counts them by kind."""

    def __init__(self, server: RunningServer, proxy: TcpProxy, fleet: Fleet, cfg: ChaosConfig) -> None:
        self.server, self.proxy, self.fleet, self.cfg = server, proxy, fleet, cfg
        self.rng = random.Random(cfg.seed)
        self.count = dict.fromkeys(FAULTS, 0)
        self.log: list[str] = []

    def schedule(self, started: float) -> list[str]:
        if self.cfg.jobs is None:  # soak: every kind in turn, in a new random order each round
            n = max(1, int(self.cfg.seconds / self.cfg.fault_gap))
            kinds = []
            while len(kinds) < n:
                kinds += self.rng.sample(FAULTS, len(FAULTS))
            kinds = kinds[:n]
        else:
            kinds = [kind for kind, n in self.cfg.faults.items() for _ in range(n)]
            self.rng.shuffle(kinds)
        return [k for k in kinds if k not in self.cfg.disabled_faults]

    def inject(self, kind: str, elapsed: float) -> None:
        detail = getattr(self, f"_{kind}")()
        self.count[kind] += 1
        self.log.append(f"{elapsed:6.1f}s {kind} {detail}")

    def _kill(self) -> str:
        kill = self.fleet.kill_one(self.rng)
        return f"{kill.mode} pid {kill.pid} ({kill.open_runs} runs open)"

    def _term(self) -> str:
        proc = self.fleet.term_one(self.rng)
        return f"{proc.mode} pid {proc.pid}"

    def _cut(self) -> str:
        return f"{self.proxy.cut()} sockets"

    def _partition(self) -> str:
        hold = self.cfg.shutdown_timeout + self.cfg.exit_grace + 3
        proc = self.fleet.partition_one(self.rng, hold)
        return f"{proc.mode} pid {proc.pid} cut off for {hold:.0f} s and SIGTERMed"

    def _pause(self) -> str:
        with self.server.client(socket_timeout=10) as admin:
            admin.execute_command("CLIENT", "PAUSE", int(self.cfg.pause * 1000), "ALL")
        time.sleep(self.cfg.pause)
        return f"{self.cfg.pause:.1f} s"

    def _freeze(self) -> str:
        """SIGSTOP the busiest asyncio worker past its lease, then SIGCONT: a process that got no CPU
        (the stall of issue 7's CI run, made on purpose). Its jobs may run again elsewhere."""
        hold = self.cfg.lease + 2
        proc = self.fleet.freeze_one(self.rng, hold)
        return f"{proc.mode} pid {proc.pid} stopped for {hold:.0f} s"

    def _restart(self) -> str:
        began = time.monotonic()
        self.server.restart()  # SIGTERM (AOF flushed), then the same flags and port
        return f"down {time.monotonic() - began:.1f} s"


def run_chaos(server: RunningServer, cfg: ChaosConfig, workdir: Path) -> Verdict:
    runs_dir, logs_dir = workdir / "runs", workdir / "logs"
    runs_dir.mkdir(parents=True)
    logs_dir.mkdir(parents=True)
    name = f"chaos-{cfg.seed}-{int(time.time())}"
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        proxy = stack.enter_context(TcpProxy(server.host, server.port))
        fleet = Fleet(proxy, name, runs_dir, logs_dir, cfg.worker_settings(), cfg.exit_grace)
        stack.callback(fleet.force_kill_all)
        for mode, n in (("sync", cfg.sync_workers), ("async", cfg.async_workers)):
            for _ in range(n):
                fleet.spawn(mode)
        faults = Faults(server, proxy, fleet, cfg)
        kinds = faults.schedule(began)
        production = cfg.seconds if cfg.jobs is None else max(10.0, len(kinds) * cfg.fault_gap)
        producer_q = Queue.from_url(proxy.url(proxy.listen()), name, **queue_settings(cfg))
        stack.callback(producer_q.close)
        plan, stop = Plan(), threading.Event()
        stack.callback(stop.set)
        producer = threading.Thread(target=produce, args=(producer_q, cfg, plan, began + production, stop),
                                    daemon=True, name="producer")  # fmt: skip
        memory: list[tuple[float, int]] = []
        sampler = threading.Thread(target=sample_memory, args=(server, memory, stop), daemon=True)
        producer.start()
        sampler.start()
        fleet.wait_started(timeout=60)
        time.sleep(1.0)
        for kind in kinds:
            faults.inject(kind, time.monotonic() - began)
            time.sleep(cfg.fault_gap)
        producer.join()
        admin = Queue.from_url(server.url, name, **{**queue_settings(cfg), "socket_timeout": 10.0})
        stack.callback(admin.close)
        drain_began = time.monotonic()
        drained = wait_drained(admin, plan, cfg.drain_timeout)
        drained["seconds"] = round(time.monotonic() - drain_began, 1)
        crashed = [f"{p.mode} pid {p.pid} exit {p.popen.returncode}:\n{p.log_tail()}"
                   for p in fleet.crashed()]  # fmt: skip
        fleet.stop_all()
        stop.set()
        sampler.join(10)
        (workdir / "memory.csv").write_text("".join(f"{t:.1f},{m}\n" for t, m in memory))
        return judge(admin, cfg, plan, fleet, faults, memory,
                     drained=drained, crashed=crashed, seconds=time.monotonic() - began)  # fmt: skip
    raise AssertionError("unreachable")


def queue_settings(cfg: ChaosConfig) -> dict[str, Any]:
    """The workers' queue settings, for the producer and the final inspection (same max_attempts)."""
    settings = dict(cfg.worker_settings()["queue"])
    settings["backoff"] = Backoff(**settings["backoff"])
    return settings


def wait_drained(admin: Queue, plan: Plan, timeout: float) -> dict[str, int]:
    """Wait until nothing is waiting, delayed or active and every enqueued job has finished."""
    deadline = time.monotonic() + timeout
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(*TRANSIENT):
            counts = admin.counts()
            busy = counts["waiting"] + counts["delayed"] + counts["active"]
            finished = counts["total_completed"] + counts["total_failed"]
            if not busy and finished >= len(plan.enqueued) - len(plan.cancels):  # none counts a cancel
                break
        time.sleep(0.25)
    return counts


def config_summary(cfg: ChaosConfig) -> dict[str, Any]:
    return {k: v for k, v in asdict(cfg).items() if k in ("seed", "jobs", "seconds", "lease", "pause")}
