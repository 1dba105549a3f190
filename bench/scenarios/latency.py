"""latency: enqueue-to-handler-start (pickup) latency through a running ``AsyncWorker``.

Producers are separate *processes* (sync ``Queue``, one connection each, the same parser); the
worker runs in this process's event loop, so producers and worker do not share a GIL. Each
job carries its *intended* send time; the handler records ``time.monotonic() - intended``
(CLOCK_MONOTONIC is system-wide on Linux), so a producer that falls behind schedule still
charges the delay to the job (no coordinated omission).

- ``load = "unloaded"``: one producer, one job in flight; the next is sent once the handler
  has started.
- ``load = "partly-busy"``: as unloaded, while ``busy`` of the worker's ``concurrency`` slots
  run slow handlers (``slow_ms`` each; every slow job enqueues its successor, so they stay
  busy): the pickup delay of a partly busy worker.
- ``load = 0.9`` (``loads``): open loop at that fraction of the *capacity*: the worker's drain rate
  with handlers that take ``handler_ms`` after pickup (so that capacity is bounded by the
  worker's slots, a rate producers on the same small machine can offer; ``handler_ms`` 0 gives
  no-op handlers), measured once per case just before the load (``capacity_jobs`` jobs enqueued
  in bulk, then drained; completions per second from the first handler call to the last).
  Enough producer processes to offer that rate are started (for twice the rate one producer
  reached alone, as they share the CPU; at most ``max_producers``); each sends its share on a
  common schedule for ``duration_s`` seconds.
  ``offered_per_s`` is the rate actually sent and ``offered_load`` its share of capacity, so a
  machine that cannot offer the load says so.

Metrics: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``p99_9_ms``, ``max_ms``, ``samples`` (jobs
measured: read a p99.9 of few samples as a maximum); open loop adds ``capacity_jobs_per_s``,
``target_per_s``, ``offered_per_s``, ``offered_load``, ``producers``.
Params: ``load``, ``concurrency`` (worker), ``jobs`` (unloaded, partly busy), ``busy``,
``slow_ms`` (partly busy), ``duration_s``, ``capacity_jobs``, ``handler_ms``, ``max_producers``
(open loop).
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import time
from typing import Any

from bench.scenarios._common import (
    Target,
    Tracker,
    Variant,
    acheck_counts,
    fill,
    make_async_queue,
    metric,
    preload_scripts,
    run_async,
)
from bench.scenarios.latency_producer import producer_main, send_rate
from bench.stats import latency_summary

NAME = "latency"
NEEDS_CONVEYOR = True
HEADLINE = ("p99_ms",)
HEADLINE_CASE = {"metric": "p99_ms", "params": {"load": "unloaded"},
                 "conditions": "enqueue to handler start, one job in flight, no-op handlers, "
                               "worker concurrency 32, RESP3, hiredis"}
QUANTILES = (50, 90, 99, 99.9)
DEFAULTS: dict[str, Any] = {"loads": [0.9], "unloaded_jobs": 2000, "duration_s": 2.0,
                            "capacity_jobs": 5000, "concurrency": 32, "max_producers": 8,
                            "busy": 16, "slow_ms": 50, "handler_ms": 5}
QUICK: dict[str, Any] = {"loads": [0.9], "unloaded_jobs": 100, "duration_s": 0.5,
                         "capacity_jobs": 1000, "concurrency": 32, "max_producers": 4,
                         "busy": 16, "slow_ms": 50, "handler_ms": 5}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Unloaded everywhere but listpack; partly busy and open-loop loads on the baseline only."""
    if variant.config == "listpack-1024":
        return []
    base = {"concurrency": options["concurrency"]}
    rows = [{"load": "unloaded", "jobs": options["unloaded_jobs"], **base}]
    if variant.primary:
        rows.append({"load": "partly-busy", "jobs": options["unloaded_jobs"],
                     "busy": options["busy"], "slow_ms": options["slow_ms"], **base})
        rows += [{"load": x, "duration_s": options["duration_s"],
                  "capacity_jobs": options["capacity_jobs"], "handler_ms": options["handler_ms"],
                  "max_producers": options["max_producers"], **base} for x in options["loads"]]
    return rows


class Probe:
    """Handler-side state; ``count`` and ``handled`` are shared with the producer processes."""

    def __init__(self, ctx: Any, handler_s: float = 0.0) -> None:
        self.handler_s = handler_s
        self.tracker = Tracker()
        self.latencies: list[float] = []
        self.count = ctx.Value("q", 0)
        self.handled = ctx.Event()
        self.drained = asyncio.Event()
        self.drain_target = 0
        self.first_call: float | None = None
        self.last_call = 0.0

    async def handler(self, job: Any) -> None:
        """Record the latency of measured jobs and count every call."""
        now = time.monotonic()
        payload = job.payload
        if payload.get("m"):
            self.latencies.append(now - payload["t"])
        self.tracker.handled(job.id)
        if self.first_call is None:
            self.first_call = now
        self.last_call = now
        with self.count.get_lock():
            self.count.value += 1
            if self.count.value == self.drain_target:
                self.drained.set()
        self.handled.set()
        if self.handler_s:
            await asyncio.sleep(self.handler_s)  # the work a handler does after pickup


class Busy:
    """Slow handlers that keep ``busy`` worker slots occupied until stopped."""

    def __init__(self, queue: Any, tracker: Tracker, slow_s: float) -> None:
        self.queue, self.tracker, self.slow_s = queue, tracker, slow_s
        self.stopping = False
        self.pending = 0

    async def start(self, count: int) -> None:
        """Enqueue the first ``count`` slow jobs."""
        for _ in range(count):
            await self._enqueue()

    async def _enqueue(self) -> None:
        self.pending += 1
        self.tracker.add([(await self.queue.enqueue("slow", {})).id])

    async def handler(self, job: Any) -> None:
        """Sleep, then (unless stopping) enqueue the successor."""
        await asyncio.sleep(self.slow_s)
        self.tracker.handled(job.id)
        self.pending -= 1
        if not self.stopping:
            await self._enqueue()

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop re-enqueueing and wait until every slow job has run."""
        self.stopping = True
        deadline = time.monotonic() + timeout
        while self.pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.pending} slow jobs did not finish")
            await asyncio.sleep(0.01)


async def _capacity(probe: Probe, jobs: int, timeout: float = 120.0) -> float:
    """Drain rate of the running worker over ``jobs`` pre-enqueued jobs (jobs/s)."""
    probe.drain_target = jobs
    await asyncio.wait_for(probe.drained.wait(), timeout)
    assert probe.first_call is not None
    return (jobs - 1) / max(probe.last_call - probe.first_call, 1e-9)


async def _measure(target: Target, params: dict[str, Any], probe: Probe, ctx: Any) -> dict:
    """Start the worker, measure capacity if needed, run the producers, stop the worker."""
    from conveyor import AsyncWorker  # noqa: PLC0415 (deliberately lazy)

    queue = make_async_queue(target, NAME)
    extra: dict[str, float] = {}
    open_loop = not isinstance(params["load"], str)
    if open_loop:
        extra["one_producer_per_s"] = _prefill(target, queue.name, params, probe)
    busy = Busy(queue, probe.tracker, params.get("slow_ms", 0) / 1e3)
    handlers = {"probe": probe.handler, "slow": busy.handler}
    worker = AsyncWorker(queue, handlers, concurrency=params["concurrency"])
    task = asyncio.create_task(worker.run())
    try:
        if open_loop:
            extra["capacity_jobs_per_s"] = await _capacity(probe, params["capacity_jobs"])
        await busy.start(params.get("busy", 0))
        prefilled = params["capacity_jobs"] if open_loop else 0
        extra |= await _run_producers(target, queue.name, params, probe, ctx=ctx, extra=extra,
                                      prefilled=prefilled)
        await busy.stop()
    finally:
        worker.stop()
        await task
    await acheck_counts(queue, waiting=0, active=0, total_completed=len(probe.tracker.enqueued))
    await queue.aclose()
    return extra


def _prefill(target: Target, name: str, params: dict[str, Any], probe: Probe) -> float:
    """Enqueue the capacity jobs (untimed, unmeasured); return one producer's send rate."""
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    queue = Queue.from_url(target.url, name, **target.settings())
    rate, ids = send_rate(queue, 300)
    ids += fill(queue, params["capacity_jobs"] - len(ids), 64, task="probe")
    queue.close()
    probe.tracker.add(ids)
    return rate


async def _run_producers(target: Target, name: str, params: dict[str, Any], probe: Probe, *,
                         ctx: Any, extra: dict[str, float], prefilled: int) -> dict[str, float]:
    """Start the producer processes, wait for their reports and every handler call."""
    count = 1
    if "capacity_jobs_per_s" in extra:
        rate = extra["capacity_jobs_per_s"] * float(params["load"])
        count = min(params["max_producers"],
                    max(1, math.ceil(2 * rate / extra["one_producer_per_s"])))
        plan = {"rate": rate, "producers": count, "duration_s": params["duration_s"]}
    else:
        plan = {"jobs": params["jobs"]}
    start_at = ctx.Value("d", 0.0)
    ready = [ctx.Event() for _ in range(count)]
    pipes = [ctx.Pipe(duplex=False) for _ in range(count)]
    procs = [ctx.Process(target=producer_main,
                         args=(target.to_dict(), name, plan, i,
                               (probe.count, probe.handled, ready[i], start_at, pipes[i][1])))
             for i in range(count)]
    for proc in procs:
        proc.start()
    try:
        for event in ready:
            if not await asyncio.to_thread(event.wait, 60):
                raise TimeoutError("a producer process did not start within 60 s")
        start_at.value = time.monotonic() + 0.05
        reports = [await asyncio.to_thread(recv.recv) for recv, _ in pipes]
    finally:
        for proc in procs:
            await asyncio.to_thread(proc.join, 10)
    return await _merge(reports, probe, plan, extra, prefilled)


async def _wait_count(probe: Probe, calls: int, timeout: float = 120.0) -> None:
    """Wait until ``calls`` probe handler calls happened."""
    deadline = time.monotonic() + timeout
    while probe.count.value < calls:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {probe.count.value} of {calls} jobs reached a handler")
        await asyncio.sleep(0.005)


async def _merge(reports: list[tuple], probe: Probe, plan: dict[str, Any],
                 extra: dict[str, float], prefilled: int) -> dict[str, float]:
    """Add every producer's ids to the tracker; raise the first producer error."""
    for ids, _, _ in reports:
        probe.tracker.add(ids)
    errors = [error for _, _, error in reports if error]
    if errors:
        raise RuntimeError(f"producer failed: {errors[0]}")
    await _wait_count(probe, prefilled + sum(len(ids) for ids, _, _ in reports))
    if "rate" not in plan:
        return {}
    sent = sum(report["sent"] for _, report, _ in reports)
    seconds = max(report["seconds"] for _, report, _ in reports)
    offered = sent / seconds
    return {"target_per_s": plan["rate"], "offered_per_s": offered,
            "offered_load": offered / extra["capacity_jobs_per_s"],
            "producers": plan["producers"]}


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one load level."""
    ctx = multiprocessing.get_context("spawn")
    probe = Probe(ctx, params.get("handler_ms", 0) / 1e3)
    preload_scripts(target.url)
    extra = run_async(target, _measure(target, params, probe, ctx))
    report = probe.tracker.verify()
    metrics = {k: metric(v, "ms") for k, v in latency_summary(probe.latencies, QUANTILES).items()}
    metrics["samples"] = metric(len(probe.latencies), "count")
    units = {"offered_load": "ratio", "producers": "count", "one_producer_per_s": "1/s"}
    metrics |= {k: metric(v, units.get(k, "1/s")) for k, v in extra.items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}
