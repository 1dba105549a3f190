"""The peer scenarios for one library row, each repetition in fresh processes.

Every throughput case is sized by time, not by a fixed job count, so a fast library's drain
is as long as a slow one's (a 400-job backlog drains in 20 ms at 20k jobs/s: noise):

- ``enqueue-single``: one call per job, sync and/or asyncio API, for ``enqueue_s`` seconds;
  jobs/s.
- ``enqueue-bulk``: calls of 50 jobs for ``enqueue_s`` seconds; "no bulk API" where the
  library has none.
- ``process``: a backlog enqueued before the worker starts, sized so that the drain lasts at
  least ``process_s`` seconds at the library's rate (``sized_jobs``, between ``process_floor``
  and ``process_cap`` jobs). The rate guess comes from the newest result file holding the same
  row and concurrency, else from the row's previous concurrency, else from a probe (a small
  backlog drained for at most ``probe_s``; discarded); it only sizes the backlog. A
  drain shorter than ``min_drain_s`` is discarded and rerun once, resized. The rate is
  taken from the handlers' own start times (first to last), so worker start-up is not timed.
  Every completion is counted by job id: lost or duplicated jobs give no rate, only the counts.
- ``latency``: unloaded end-to-end, one job in flight, enqueue call to handler start; up to
  ``latency`` samples, no new one sent after ``latency_s`` seconds (a library that polls every
  0.5 s gives fewer samples, stated in the row).
- ``memory``: server ``used_memory`` slope as one backlog grows through several sizes (bytes
  per waiting job).
"""

from __future__ import annotations

import statistics
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers import costs
from bench.peers.drive import Child, ChildFailed, Hung, count_lines, read_log, wait_for
from bench.scenarios._common import sized_jobs
from bench.stats import latency_summary, slope, summarize

SIZES: dict[str, dict[str, Any]] = {
    "full": {"enqueue_s": 1.0, "process_s": 2.0, "min_drain_s": 1.5, "probe_jobs": 200,
             "probe_s": 1.0, "process_floor": 20, "process_cap": 60_000, "latency": 300,
             "latency_s": 4.0, "memory": [2000, 4000, 6000], "concurrencies": [1, 32, 100]},
    "quick": {"enqueue_s": 0.2, "process_s": 0.3, "min_drain_s": 0.2, "probe_jobs": 100,
              "probe_s": 1.0, "process_floor": 20, "process_cap": 2000, "latency": 40,
              "latency_s": 2.0, "memory": [200, 600, 1000], "concurrencies": [1, 32, 100]},
}
CHILD_TIMEOUT = {"quick": 120.0, "full": 180.0}  # per child call; a slower drain is "timed out"
LATENCY_WARMUP = 5
MEMORY_BATCH = 50
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

    def __init__(self, child: Child, flush: Callable[[], None], used_memory: Callable[[], int], *,
                 repetitions: int, timeout: float, stats: costs.Stats | None = None) -> None:
        self.child, self.flush, self.used_memory = child, flush, used_memory
        self.repetitions, self.timeout, self.stats = repetitions, timeout, stats
        self.last_cost: dict[str, float] = {}  # per-job costs of the last drain
        self.rate_hint: float | None = None  # jobs/s of the row's previous process case
        self.known: dict[int, float] = {}  # jobs/s by concurrency from a previous run (sizing only)

    def _reps(self, one: Callable[[], float]) -> list[float]:
        values = []
        for _ in range(self.repetitions):
            self.flush()
            values.append(one())
        return values

    def enqueue(self, seconds: float, api: str) -> dict[str, Any]:
        """jobs/s of calls through ``api`` (sync, async or bulk) for ``seconds``."""
        jobs: list[int] = []
        spent: list[dict[str, float]] = []

        def one() -> float:
            before = self.stats() if self.stats else {}
            out = self.child.call("enqueue", self.timeout, prefix=uuid.uuid4().hex[:8],
                                  api=api, min_seconds=seconds)
            cost = costs.per_job(before, self.stats(), out["jobs"]) if self.stats else {}
            spent.append({**cost, "client_cpu_us": 1e6 * out["cpu_s"] / out["jobs"]})
            jobs.append(out["jobs"])
            return float(out["jobs"] / out["elapsed"])

        rates = self._reps(one)
        return {"jobs_per_s": summarize(rates, "1/s"), **costs.metrics(spent),
                "_sizing": {"jobs": jobs}}

    def _drain(self, n: int, concurrency: int, limit: float) -> tuple[list[str], list[tuple[str, float]]]:
        """Fill ``n`` jobs, start a worker, wait (at most ``limit`` s) until all are done;
        per-job costs from the first to the last completion go to ``last_cost``."""
        job_ids = ids(n)
        self.child.call("fill", self.timeout, ids=job_ids)
        log = self.child.tmp / f"process-{job_ids[0]}.log"
        worker = self.child.start_worker(concurrency, log)
        self.last_cost = {}
        try:
            # Polled closely: the costs window opens at the first completion.
            started = wait_for(log, 1, limit, worker, poll=0.002)
            first = self._snapshot(worker.proc.pid, log) if started else None
            finished = wait_for(log, n, limit, worker)
            if finished and first is not None:
                last = self._snapshot(worker.proc.pid, log)
                self.last_cost = costs.per_job(first, last, int(last["done"] - first["done"]))
            if not finished and not worker.alive():
                raise ChildFailed(worker.error())
            if finished:  # a moment more, to see duplicates arriving late
                wait_for(log, n + 1, 0.3, worker)
        finally:
            worker.kill()
        return job_ids, read_log(log)

    def _snapshot(self, pid: int, log: Path) -> dict[str, float]:
        """Completions so far, the worker's CPU and the server's counters."""
        return {"done": float(count_lines(log)), **(self.stats() if self.stats else {}),
                "client_cpu_us": 1e6 * costs.process_cpu_s(pid)}

    def probe(self, concurrency: int, jobs: int, seconds: float) -> float:
        """A rough rate to size the first backlog by: a small drain, timed for at most
        ``seconds`` from its first completion (worker start-up is not in the guess)."""
        self.flush()
        job_ids = ids(jobs)
        self.child.call("fill", self.timeout, ids=job_ids)
        log = self.child.tmp / f"probe-{job_ids[0]}.log"
        worker = self.child.start_worker(concurrency, log)
        try:
            if not wait_for(log, 1, self.timeout, worker):
                raise ChildFailed(worker.error() if not worker.alive() else "probe: no job done")
            wait_for(log, jobs, seconds, worker)
        finally:
            worker.kill()
        starts = sorted(t for _, t in read_log(log))
        if len(starts) >= 10 and starts[-1] > starts[0]:
            return (len(starts) - 1) / (starts[-1] - starts[0])
        return max(len(starts) - 1, 1) / seconds

    def process(self, concurrency: int, sizes: dict[str, Any]) -> dict[str, Any]:
        """Drain a time-sized backlog at ``concurrency``; jobs/s from handler start times."""
        target, floor, cap = sizes["process_s"], sizes["process_floor"], sizes["process_cap"]
        source = ("previous run" if concurrency in self.known
                  else "previous concurrency" if self.rate_hint else "probe")
        guess = (self.known.get(concurrency) or self.rate_hint
                 or self.probe(concurrency, sizes["probe_jobs"], sizes["probe_s"]))
        n = sized_jobs(guess, target, floor, cap)
        values: list[float] = []
        sizing: dict[str, Any] = {"guess_from": source, "guess_jobs_per_s": round(guess, 1),
                                  "jobs": [], "drain_s": [], "discarded_drain_s": []}
        counts: dict[str, int] = {}
        spent: list[dict[str, float]] = []
        while len(values) < self.repetitions:
            self.flush()
            rate, seconds, counts = self._one_drain(n, concurrency)
            if seconds < sizes["min_drain_s"] and n < cap and not sizing["discarded_drain_s"]:
                sizing["discarded_drain_s"].append(round(seconds, 3))  # too short: resize once
                n = sized_jobs(rate, target, floor, cap)
                continue
            values.append(rate)
            spent.append(self.last_cost)
            sizing["jobs"].append(n)
            sizing["drain_s"].append(round(seconds, 3))
        self.rate_hint = statistics.median(values)
        return {"jobs_per_s": summarize(values, "1/s"), **costs.metrics(spent),
                "_counts": counts, "_sizing": sizing}

    def _one_drain(self, n: int, concurrency: int) -> tuple[float, float, dict[str, int]]:
        """(jobs/s, drain seconds, counts by id) of one fresh backlog and worker."""
        job_ids, entries = self._drain(n, concurrency, self.timeout)
        counts = count(job_ids, entries)
        starts = sorted(t for _, t in entries)
        seconds = starts[-1] - starts[0] if starts else 0.0
        rate = (len(starts) - 1) / max(seconds, 1e-9) if starts else 0.0
        if counts["lost"] and not counts["duplicated"] and not counts["unknown"]:
            raise TooSlow(f"{counts['completed']} of {n} jobs done within "
                          f"{self.timeout:.0f} s", rate, counts)
        _check(counts)
        return rate, seconds, counts

    def latency(self, n: int, budget_s: float) -> dict[str, Any]:
        """Unloaded enqueue-to-handler-start latency, one job in flight, concurrency 1."""
        per_rep: list[dict[str, float]] = []
        samples: list[int] = []
        for _ in range(self.repetitions):
            self.flush()
            job_ids = ids(n + LATENCY_WARMUP)
            log = self.child.tmp / f"latency-{job_ids[0]}.log"
            log.touch()
            worker = self.child.start_worker(1, log)
            try:
                out = self.child.call("latency", self.timeout, ids=job_ids, log=str(log),
                                      wait_s=self.timeout, budget_s=budget_s,
                                      least=LATENCY_WARMUP + 10)
            finally:
                worker.kill()
            sent = [j for j in job_ids if j in out["sent"]]
            entries = read_log(log)
            _check(count(sent, entries))
            started = dict(entries)
            measured = sent[LATENCY_WARMUP:]
            samples.append(len(measured))
            per_rep.append(latency_summary([started[j] - out["sent"][j] for j in measured],
                                           QUANTILES))
        return {**{name: summarize([rep[name] for rep in per_rep], "ms") for name in per_rep[0]},
                "_sizing": {"samples": samples}}

    def memory(self, counts: list[int]) -> dict[str, Any]:
        """Bytes of server memory per waiting job: the slope of used_memory as one backlog
        grows through ``counts`` (no flush between points: after a flush the baseline moves).
        Fills use calls of 50 like ``enqueue-bulk``: on Redis 8.2, calls of 500 jobs left
        query-buffer memory in used_memory that swung readings by ±200 kB."""
        def one() -> float:
            self.child.call("fill", self.timeout, ids=ids(10), batch=MEMORY_BATCH)  # scripts loaded
            before, done, deltas = self.used_memory(), 0, [0.0]
            for n in counts:
                self.child.call("fill", self.timeout, ids=ids(n - done), batch=MEMORY_BATCH)
                done = n
                deltas.append(float(self.used_memory() - before))
            return slope([0.0, *(float(c) for c in counts)], deltas)

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
    sizing = metrics.pop("_sizing", None)
    return {"status": "ok", "metrics": metrics, **({"counts": counts} if counts else {}),
            **({"sizing": sizing} if sizing else {})}
