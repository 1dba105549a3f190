"""The peer scenarios for one library row, each repetition in fresh processes.

- ``enqueue-single``: N jobs, one call each, sync and/or asyncio API; jobs/s.
- ``enqueue-bulk``: N jobs in calls of 50; "no bulk API" where the library has none.
- ``process``: a backlog of N jobs enqueued before the worker starts; the rate is taken from
  the handlers' own start times (first to last), so worker start-up is not timed. Every
  completion is counted by job id: lost or duplicated jobs give no rate, only the counts.
- ``latency``: unloaded end-to-end, one job in flight, enqueue call to handler start.
- ``memory``: server ``used_memory`` slope over several backlog sizes (bytes per waiting job).
"""

from __future__ import annotations

import statistics
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers.drive import Child, ChildFailed, Hung, read_log, wait_for
from bench.stats import latency_summary, slope, summarize

SIZES = {
    "full": {"enqueue": 2000, "bulk": 5000, "process": 5000, "latency": 300,
             "memory": [1000, 3000, 5000], "concurrencies": [1, 32, 100]},
    "quick": {"enqueue": 200, "bulk": 500, "process": 400, "latency": 40,
              "memory": [200, 600, 1000], "concurrencies": [1, 32, 100]},
}
LATENCY_WARMUP = 5
QUANTILES = (50, 95, 99)


class TooSlow(Hung):
    """A backlog not drained within the timeout, nothing lost or duplicated so far: the rate
    of what completed is kept (labelled as timed out), since slow is not hung."""

    def __init__(self, message: str, rate: float, counts: dict[str, int]) -> None:
        super().__init__(message)
        self.rate, self.counts = rate, counts


class CountMismatch(RuntimeError):
    """Completions by id differ from the jobs enqueued."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__(", ".join(f"{k}={v}" for k, v in counts.items()))
        self.counts = counts


def ids(n: int) -> list[str]:
    """Fresh job ids for one repetition."""
    run = uuid.uuid4().hex[:8]
    return [f"{run}-{i}" for i in range(n)]


def count(expected: list[str], log: list[tuple[str, float]]) -> dict[str, int]:
    """Enqueued, completed once, lost and duplicated, by job id."""
    seen = Counter(job for job, _ in log)
    want = set(expected)
    return {"enqueued": len(want), "completed": sum(1 for j in want if seen[j] >= 1),
            "lost": sum(1 for j in want if seen[j] == 0),
            "duplicated": sum(1 for j in want if seen[j] > 1),
            "unknown": sum(1 for j in seen if j not in want)}


def _check(counts: dict[str, int]) -> None:
    if counts["lost"] or counts["duplicated"] or counts["unknown"]:
        raise CountMismatch(counts)


class Row:
    """One (library, flavour) on one server: runs repetitions of each scenario."""

    def __init__(self, child: Child, flush: Callable[[], None], used_memory: Callable[[], int],
                 repetitions: int, timeout: float) -> None:
        self.child, self.flush, self.used_memory = child, flush, used_memory
        self.repetitions, self.timeout = repetitions, timeout

    def _reps(self, one: Callable[[], float]) -> list[float]:
        values = []
        for _ in range(self.repetitions):
            self.flush()
            values.append(one())
        return values

    def enqueue(self, n: int, api: str) -> dict[str, Any]:
        """jobs/s of ``n`` enqueues through ``api`` (sync, async or bulk)."""
        def one() -> float:
            out = self.child.call("enqueue", self.timeout, ids=ids(n), api=api)
            return n / out["elapsed"]

        return {"jobs_per_s": summarize(self._reps(one), "1/s")}

    def process(self, n: int, concurrency: int) -> dict[str, Any]:
        """Drain a backlog of ``n`` jobs at ``concurrency``; jobs/s from handler start times."""
        counts: dict[str, int] = {}

        def one() -> float:
            nonlocal counts
            job_ids = ids(n)
            self.child.call("fill", self.timeout, ids=job_ids)
            log = self.child.tmp / f"process-{job_ids[0]}.log"
            worker = self.child.start_worker(concurrency, log)
            try:
                finished = wait_for(log, n, self.timeout, worker)
                if not finished and not worker.alive():
                    raise ChildFailed(worker.error())
                if finished:  # a moment more, to see duplicates arriving late
                    wait_for(log, n + 1, 0.3, worker)
            finally:
                worker.kill()
            entries = read_log(log)
            counts = count(job_ids, entries)
            starts = sorted(t for _, t in entries)
            rate = (len(starts) - 1) / max(starts[-1] - starts[0], 1e-9) if starts else 0.0
            if counts["lost"] and not counts["duplicated"] and not counts["unknown"]:
                raise TooSlow(f"{counts['completed']} of {n} jobs done within "
                              f"{self.timeout:.0f} s", rate, counts)
            _check(counts)
            return rate

        return {"jobs_per_s": summarize(self._reps(one), "1/s"), "_counts": counts}

    def latency(self, n: int) -> dict[str, Any]:
        """Unloaded enqueue-to-handler-start latency, one job in flight, concurrency 1."""
        per_rep: list[dict[str, float]] = []
        for _ in range(self.repetitions):
            self.flush()
            job_ids = ids(n + LATENCY_WARMUP)
            log = self.child.tmp / f"latency-{job_ids[0]}.log"
            log.touch()
            worker = self.child.start_worker(1, log)
            try:
                out = self.child.call("latency", self.timeout, ids=job_ids, log=str(log),
                                      wait_s=self.timeout)
            finally:
                worker.kill()
            entries = read_log(log)
            _check(count(job_ids, entries))
            started = dict(entries)
            samples = [started[j] - out["sent"][j] for j in job_ids[LATENCY_WARMUP:]]
            per_rep.append(latency_summary(samples, QUANTILES))
        return {name: summarize([rep[name] for rep in per_rep], "ms") for name in per_rep[0]}

    def memory(self, counts: list[int]) -> dict[str, Any]:
        """Bytes of server memory per waiting job: slope of used_memory over backlog sizes."""
        def one() -> float:
            deltas = []
            for n in counts:
                self.flush()
                before = self.used_memory()
                self.child.call("fill", self.timeout, ids=ids(n))
                deltas.append(self.used_memory() - before)
            return slope([float(c) for c in counts], [float(d) for d in deltas])

        return {"bytes_per_job": summarize(self._reps(one), "B")}


def median(metric: dict[str, Any]) -> float:
    """The median of a stored metric."""
    return float(statistics.median(metric["values"]))


def run_guarded(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a scenario; turn failures into a status instead of a figure."""
    try:
        metrics = fn()
    except CountMismatch as exc:
        return {"status": "failed", "error": f"completions by id: {exc}", "counts": exc.counts}
    except TooSlow as exc:
        partial = {"jobs_per_s": summarize([exc.rate], "1/s")} if exc.rate > 0 else {}
        return {"status": "timeout", "error": str(exc), "counts": exc.counts,
                **({"metrics": partial} if partial else {})}
    except Hung as exc:
        return {"status": "timeout", "error": str(exc)}
    except ChildFailed as exc:
        return {"status": "failed", "error": str(exc)}
    counts = metrics.pop("_counts", None)
    return {"status": "ok", "metrics": metrics, **({"counts": counts} if counts else {})}


def log_path(child: Child, name: str) -> Path:
    """A log file in the row's temp dir."""
    return child.tmp / name
