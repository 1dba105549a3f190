"""The chaos run: worker processes behind a cuttable proxy, a producer (_producer.py), and
seeded faults.

`run_chaos(server, config, workdir)` drives one run against a server started with AOF on and
returns a `Verdict` (see _verdict.py) with the figures and every problem found. Everything random
comes from one `random.Random(config.seed)`, so a failing seed can be replayed (timing still varies).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _fleet import Fleet
from _producer import TRANSIENT, Plan, produce
from _proxy import TcpProxy
from _verdict import Verdict, judge, sample_memory
from conveyor import Backoff, Queue

from bench.servers import RunningServer

FAULTS = ("kill", "cut", "term", "partition", "pause", "restart", "freeze")
FAULT_COUNTS = {"kill": 3, "cut": 2, "term": 2, "partition": 1, "pause": 2, "restart": 1, "freeze": 1}


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
