"""process: drain pre-enqueued no-op jobs with ``AsyncWorker(burst=True)``.

The jobs are enqueued (in bulk, untimed) before the worker exists, so nothing is consumed
before the clock. The clock runs from the worker's first claim to its last ack: the start-up
of its connections and the shutdown of its tasks are not timed (``worker_run_s`` shows the
whole ``run()`` call for comparison). Each repetition first drains ``calibration_jobs`` (a
warm-up of this process and the server) to estimate the rate, then sizes the next drain to
last at least ``min_seconds`` (resized and rerun, at most a few times, while it falls short);
the last drain is the figure and ``jobs`` records its size. Every handler call is
counted by job id; the server's counts must show every job completed once.

With ``result_bytes`` (one extra case on the baseline variant, at concurrency ``result_concurrency``)
the queue stores results (``store_results=True``) and every handler returns a string that encodes
to ``result_bytes`` bytes: the same drain, one thing changed, so the cost of storing a result is
the ratio of the two cases' jobs/s in one run. Cases without the param store nothing. The results
case's timing metrics end in ``_storing_results`` (``jobs_per_s_storing_results``), so readers of
the no-op figures (headline, history, peers) never pick it up by its concurrency.

With ``prefetch`` (one more case on the baseline variant, at ``prefetch_concurrency`` when that
concurrency is measured too) the worker leases ``prefetch`` jobs beyond its running ones
(``AsyncWorker(prefetch=...)``): the same drain, one setting changed. Its metrics end in
``_prefetch`` (``jobs_per_s_prefetch``, ``client_cpu_us_per_job_prefetch``), so readers of the
default worker's figures never pick it up by its concurrency; the Tuning page compares the two.

Metrics: ``jobs_per_s``, ``elapsed_s``, ``jobs``, ``worker_run_s``, ``calibration_jobs_per_s``;
``client_cpu_us_per_job``: CPU time of the worker process over the same window, per job.
Params: ``min_seconds``, ``concurrency``, ``payload_bytes``, ``result_bytes`` (results case only),
``prefetch`` (prefetch case only).

``features`` (one more case on the baseline variant, at ``features_concurrency`` when that
concurrency is measured too, for the like-for-like ratio) = :data:`FEATURES`: jobs alternate
between priority levels 0 and 5, all carry one per-key concurrency limit set high enough never to
park a job (the cost of the bookkeeping, not of waiting), and the handler is a registered task
wrapped by a ``before`` and an ``after`` hook (its payload is task arguments,
``{"args": [payload]}``). Its rows are kept apart by the report (``Dataset.featured``), so readers
of the no-op figures never pick it up by its concurrency.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.scenarios._common import (
    Target,
    Tracker,
    Variant,
    acheck_counts,
    cpu_per_job,
    fill,
    make_async_queue,
    make_queue,
    metric,
    payload_of,
    preload_scripts,
    run_async,
    sized_jobs,
)

NAME = "process"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
HEADLINE_CASE = {"metric": "jobs_per_s",
                 "params": {"concurrency": 32, "payload_bytes": 64, "features": None},
                 "conditions": "no-op handlers, one AsyncWorker with concurrency 32, 64 B payload, "
                               "first claim to last ack, RESP3, hiredis"}
DEFAULTS: dict[str, Any] = {"min_seconds": 2.0, "concurrencies": [1, 32, 100], "payload_bytes": 64,
                            "calibration_jobs": 2000, "max_jobs": 250000, "result_bytes": 100,
                            "result_concurrency": 32,
                            "features_concurrency": 32, "prefetch": 32, "prefetch_concurrency": 32}
MAX_ROUNDS = 4
RESULT_SUFFIX = "_storing_results"
PREFETCH_SUFFIX = "_prefetch"
QUICK: dict[str, Any] = {"min_seconds": 0.3, "concurrencies": [1, 32, 100], "payload_bytes": 64,
                         "calibration_jobs": 500, "max_jobs": 20000, "result_bytes": 100,
                         "result_concurrency": 32,
                         "features_concurrency": 32, "prefetch": 32, "prefetch_concurrency": 32}
FEATURES = "priorities+limit-key+hooks"
HIGH_LIMIT = 100_000  # per-key concurrency limit of the features case: never reached


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every concurrency on the baseline (plus the stored-result case); the highest only on other
    variants."""
    concs = options["concurrencies"] if variant.primary else options["concurrencies"][-1:]
    if variant.config == "listpack-1024":
        return []
    keep = ("min_seconds", "payload_bytes", "calibration_jobs", "max_jobs")
    out = [{**{k: options[k] for k in keep}, "concurrency": c} for c in concs]
    if variant.primary and options.get("result_bytes"):
        out.append({**{k: options[k] for k in keep}, "concurrency": options["result_concurrency"],
                    "result_bytes": options["result_bytes"]})
    if variant.primary and options["features_concurrency"] in concs:  # compared at a measured one
        out.append({**{k: options[k] for k in keep}, "concurrency": options["features_concurrency"],
                    "features": FEATURES})
    if variant.primary and options.get("prefetch") and options["prefetch_concurrency"] in concs:
        out.append({**{k: options[k] for k in keep}, "concurrency": options["prefetch_concurrency"],
                    "prefetch": options["prefetch"]})
    return out


def result_value(size: int) -> str:
    """A string whose JSON encoding (quotes included) is ``size`` bytes."""
    if size < 2:
        raise ValueError(f"result_bytes must be >= 2 (a JSON string), got {size}")
    return "r" * (size - 2)


@dataclass
class Window:
    """Perf-counter instants of the drain: first claim sent, all handlers done, last ack back."""

    jobs: int
    first_claim: float | None = None
    all_done: float | None = None
    last_ack: float | None = None
    cpu_first_claim: float | None = None  # process CPU time at those instants
    cpu_last_ack: float | None = None

    def seconds(self) -> float:
        """First claim to last ack, or a clear error when the worker hook never fired."""
        if self.first_claim is None or self.last_ack is None:
            raise RuntimeError("the claim/ack window was not observed: AsyncWorker._exchange "
                               "changed; update bench/scenarios/process.py")
        return self.last_ack - self.first_claim

    def cpu_seconds(self) -> float:
        """Process CPU time from the first claim to the last ack (the same window)."""
        if self.cpu_first_claim is None or self.cpu_last_ack is None:
            raise RuntimeError("the claim/ack window was not observed")
        return self.cpu_last_ack - self.cpu_first_claim


def timed_worker(queue: Any, handlers: dict[str, Any], window: Window, **options: Any) -> Any:
    """An AsyncWorker whose pump exchanges (one ack+claim call each) are timed into ``window``."""
    from conveyor import AsyncWorker  # noqa: PLC0415 (deliberately lazy)

    class TimedWorker(AsyncWorker):
        async def _exchange(self, pump: Any) -> Any:
            sent, cpu = time.perf_counter(), time.process_time()
            claimed, until_due = await super()._exchange(pump)
            if claimed and window.first_claim is None:
                window.first_claim, window.cpu_first_claim = sent, cpu
            if window.all_done is not None and sent >= window.all_done:
                window.last_ack = time.perf_counter()  # this call carried the last acks
                window.cpu_last_ack = time.process_time()
            return claimed, until_due

    if "_exchange" not in vars(AsyncWorker):
        raise RuntimeError("AsyncWorker._exchange is gone: update bench/scenarios/process.py")
    return TimedWorker(queue, handlers, **options)


async def drain(target: Target, name: str, params: dict[str, Any], tracker: Tracker,
                jobs: int) -> tuple[float, float, float]:
    """Run a burst worker on queue ``name``; return (claim-to-ack seconds, run() seconds,
    process CPU seconds from claim to ack)."""
    size = params.get("result_bytes")
    queue = make_async_queue(target, NAME, name=name, **({"store_results": True} if size else {}))
    window = Window(jobs)
    handled = [0]
    value = result_value(size) if size else None

    def done(job: Any, *_: Any) -> Any:
        tracker.handled(job.id)
        handled[0] += 1
        if handled[0] == jobs:
            window.all_done = time.perf_counter()
        return value

    async def noop(job: Any) -> Any:
        return done(job)

    handler = hooked_noop(done) if params.get("features") else noop
    await acheck_counts(queue, waiting=jobs, active=0)
    worker = timed_worker(queue, {"noop": handler}, window, concurrency=params["concurrency"],
                          prefetch=params.get("prefetch", 0), burst=True)
    start = time.perf_counter()
    await worker.run()
    wall = time.perf_counter() - start
    await acheck_counts(queue, waiting=0, active=0, total_completed=jobs)
    if size:
        await acheck_results(queue, tracker, value)
    await queue.aclose()
    return window.seconds(), wall, window.cpu_seconds()


async def acheck_results(queue: Any, tracker: Tracker, value: str) -> None:
    """The results case really stored results: a sampled job's result is the handler's value."""
    sample = next(iter(tracker.enqueued))
    stored = await queue.result(sample, 5)
    if stored != value:
        raise AssertionError(f"job {sample}: stored result {stored!r:.40} is not the handler's value")


def hooked_noop(done: Any) -> Any:
    """The features case's handler: a registered no-op task inside a before and an after hook."""
    from conveyor import Conveyor  # noqa: PLC0415 (deliberately lazy)
    from conveyor._hooks import async_handler  # noqa: PLC0415

    app = Conveyor("redis://unused")  # only its registry and hooks: no client is created
    seen = [0]

    async def noop(payload: Any) -> None:
        return None

    app.task(name="noop")(noop)
    app.before(lambda job: seen.__setitem__(0, seen[0] + 1))
    app.after(done)
    return async_handler(app.get_task("noop"), app.hooks)


def _fill(producer: Any, params: dict[str, Any], jobs: int) -> list[str]:
    if not params.get("features"):
        return fill(producer, jobs, params["payload_bytes"])
    from conveyor import JobSpec, Limit  # noqa: PLC0415 (deliberately lazy)

    payload, limit, ids = {"args": [payload_of(params["payload_bytes"])]}, Limit("bench", HIGH_LIMIT), []
    for start in range(0, jobs, 1000):
        batch = [JobSpec("noop", payload, priority=5 * (i % 2), limit=limit)
                 for i in range(start, min(jobs, start + 1000))]
        ids += [job.id for job in producer.enqueue_many(batch)]
    return ids


def _round(target: Target, params: dict[str, Any],
           jobs: int) -> tuple[float, float, float, dict]:
    """Enqueue ``jobs`` on a fresh queue, drain them; (seconds, run seconds, CPU seconds,
    exactly-once)."""
    producer = make_queue(target, NAME)
    tracker = Tracker()
    tracker.add(_fill(producer, params, jobs))
    producer.close()
    elapsed, wall, cpu = run_async(target, drain(target, producer.name, params, tracker, jobs))
    return elapsed, wall, cpu, tracker.verify()


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Calibrate and size until a drain lasts ``min_seconds``; the last drain is the figure."""
    preload_scripts(target.url)
    jobs, rounds, rate = params["calibration_jobs"], 0, 0.0
    while True:
        elapsed, wall, cpu, report = _round(target, params, jobs)
        rounds += 1
        long_enough = elapsed >= params["min_seconds"] or jobs >= params["max_jobs"]
        if rounds > 1 and (long_enough or rounds >= MAX_ROUNDS):
            break  # after MAX_ROUNDS the last drain stands; elapsed_s shows how long it ran
        rate = jobs / elapsed  # the first (calibration) round also warms the process and server
        jobs = sized_jobs(rate, params["min_seconds"], jobs, params["max_jobs"])
    # The results and prefetch cases name their figures apart, so no figure of the default
    # worker's no-op drain is ever read from them.
    suffix = (RESULT_SUFFIX if params.get("result_bytes")
              else PREFETCH_SUFFIX if params.get("prefetch") else "")
    return {
        "metrics": {"jobs_per_s" + suffix: metric(jobs / elapsed, "1/s"),
                    "elapsed_s" + suffix: metric(elapsed, "s"), "jobs": metric(jobs, "count"),
                    "worker_run_s" + suffix: metric(wall, "s"),
                    "client_cpu_us_per_job" + suffix: cpu_per_job(cpu, jobs),
                    "calibration_jobs_per_s" + suffix: metric(rate, "1/s")},
        "exactly_once": report,
        "extra": {"clock": "first claim sent to last ack received"},
    }
