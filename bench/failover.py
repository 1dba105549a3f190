"""Drive producers and a worker across a primary's death and count what was lost or run twice.

A producer enqueues jobs with ids `j0, j1, ...`, retrying each id until an enqueue returns (an id
makes the retry idempotent); a returned enqueue is *acknowledged*. A worker runs every job it gets
and counts runs per id. After `before` acknowledged enqueues the `kill` callback crashes the primary
(SIGKILL); the producer continues until `after` more are acknowledged, which proves that clients
found the new primary by themselves. Then the worker drains the queue; an acknowledged id that never
ran is *lost*, an id that ran more than once *ran twice*.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from conveyor import ConveyorError, JobSpec, Queue, Worker

from bench.servers import RunningServer
from bench.topologies import wait_until

DEADLINE = 120.0


@dataclass
class Outcome:
    acknowledged: list[str] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)
    ran_after_kill: int = 0
    enqueue_errors: int = 0
    killed_at: float | None = None  # time.monotonic() of the kill
    enqueue_recovered_at: float | None = None  # first enqueue acknowledged after the kill
    run_recovered_at: float | None = None  # first job run after the kill

    @property
    def enqueue_recovery_s(self) -> float:
        return _since(self.killed_at, self.enqueue_recovered_at)

    @property
    def run_recovery_s(self) -> float:
        return _since(self.killed_at, self.run_recovered_at)

    @property
    def lost(self) -> list[str]:
        return [job_id for job_id in self.acknowledged if job_id not in self.runs]

    @property
    def ran_twice(self) -> list[str]:
        return [job_id for job_id, count in self.runs.items() if count > 1]

    def summary(self) -> str:
        return (
            f"acknowledged={len(self.acknowledged)} lost={len(self.lost)} "
            f"ran_twice={len(self.ran_twice)} ran_after_kill={self.ran_after_kill} "
            f"enqueue_errors={self.enqueue_errors} enqueue_recovery_s={self.enqueue_recovery_s:.2f} "
            f"run_recovery_s={self.run_recovery_s:.2f}"
        )


def _since(start: float | None, end: float | None) -> float:
    return float("nan") if start is None or end is None else end - start


def drive(make_queue: Callable[[], Queue], kill: Callable[[], None], before: int = 300,
          after: int = 300, *, pause: float = 0.002, batch: int = 1) -> Outcome:  # fmt: skip
    """Run the producer and the worker across ``kill``; ``pause``: seconds between enqueue calls;
    ``batch``: jobs per call (above 1, ``enqueue_many``: the producer outruns the worker)."""
    outcome, lock = Outcome(), threading.Lock()
    killed, stop_producing = threading.Event(), threading.Event()

    def handle(job) -> None:  # type: ignore[no-untyped-def]
        with lock:
            outcome.runs[job.id] += 1
            if killed.is_set():
                outcome.ran_after_kill += 1
                outcome.run_recovered_at = outcome.run_recovered_at or time.monotonic()

    def produce(queue: Queue) -> None:
        i = 0
        while not stop_producing.is_set():
            specs = [JobSpec("t", k, job_id=f"j{k}") for k in range(i, i + batch)]
            try:
                queue.enqueue_many(specs) if batch > 1 else queue.enqueue("t", i, job_id=specs[0].job_id)
            except ConveyorError:
                outcome.enqueue_errors += 1
                time.sleep(0.05)
                continue
            outcome.acknowledged.extend(str(spec.job_id) for spec in specs)
            if killed.is_set() and outcome.enqueue_recovered_at is None:
                outcome.enqueue_recovered_at = time.monotonic()
            i += batch
            if pause:
                time.sleep(pause)  # a steady stream, not a flood: the worker keeps up

    producer_queue, worker_queue = make_queue(), make_queue()
    worker = Worker(worker_queue, {"t": handle}, concurrency=4, install_signal_handlers=False)
    threads = [threading.Thread(target=worker.run), threading.Thread(target=produce, args=(producer_queue,))]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(outcome.acknowledged) >= before, "enqueues before the kill", DEADLINE)
        outcome.killed_at = time.monotonic()
        kill()
        killed.set()
        target = len(outcome.acknowledged) + after
        wait_until(lambda: len(outcome.acknowledged) >= target, "enqueues after the failover", DEADLINE)
        stop_producing.set()
        threads[1].join(DEADLINE)
        wait_until(lambda: _drained(producer_queue), "the worker to drain the queue", DEADLINE)
    finally:
        stop_producing.set()
        worker.stop()
        for thread in threads:
            thread.join(DEADLINE)
        for queue in (producer_queue, worker_queue):
            with contextlib.suppress(Exception):
                queue.close()
    return outcome


def _drained(queue: Queue) -> bool:
    counts = queue.counts()
    return counts["waiting"] + counts["delayed"] + counts["active"] == 0


def cut_then_kill(primary: RunningServer, replicas: list[RunningServer], cut_s: float) -> None:
    """Cut ``primary`` off from its ``replicas`` for ``cut_s``, then SIGKILL it: a partition
    followed by the loss of the primary's host. The replicas are frozen (SIGSTOP) so they cannot
    reconnect, their links closed (``CLIENT KILL TYPE replica``); they resume once it died.
    Writes the primary acknowledged meanwhile exist nowhere else."""
    pids = [replica.pid for replica in replicas]
    if None in pids:
        raise RuntimeError("a replica to freeze is not running")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        with primary.client() as client:
            client.execute_command("CLIENT", "KILL", "TYPE", "replica")
        time.sleep(cut_s)
        primary.kill()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)  # type: ignore[arg-type]


Shard = tuple[RunningServer, list[RunningServer]]


def shard_of(shards: list[list[RunningServer]], primary: RunningServer) -> Shard:
    """``primary`` and the live servers of its shard besides it (its replicas)."""
    shard = next(members for members in shards if primary in members)
    return primary, [srv for srv in shard if srv is not primary and srv.running]
