"""latency: enqueue-to-handler-start latency through a running ``AsyncWorker``.

A producer *process* (sync ``Queue``, one connection, the same parser) enqueues; the worker
runs in this process's event loop, so producer and worker do not share a GIL. Each job
carries its *intended* send time; the handler records ``time.monotonic() - intended``
(CLOCK_MONOTONIC is system-wide on Linux), so a producer that falls behind schedule still
charges the delay to the job (no coordinated omission).

- ``load = "unloaded"``: one job in flight; the next is sent once the handler has started.
- ``load = 0.25 / 0.5 / 0.75``: open loop at that fraction of the capacity measured just
  before, in the same process (one producer enqueueing one job per call as fast as it can,
  the worker draining: completions per second), for ``duration_s`` seconds.

Metrics: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``p99_9_ms``, ``max_ms``; open loop adds
``capacity_jobs_per_s`` and ``offered_per_s`` (the achieved send rate).
Params: ``load``, ``concurrency`` (worker), ``jobs`` (unloaded) or ``duration_s`` (open loop).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import time
from typing import Any

from bench.scenarios._common import (
    Target,
    Tracker,
    Variant,
    acheck_counts,
    make_async_queue,
    metric,
    preload_scripts,
)
from bench.stats import latency_summary

NAME = "latency"
NEEDS_CONVEYOR = True
HEADLINE = ("p99_ms",)
QUANTILES = (50, 90, 99, 99.9)
DEFAULTS: dict[str, Any] = {"loads": [0.25, 0.5, 0.75], "unloaded_jobs": 300, "duration_s": 3.0,
                            "capacity_jobs": 2000, "concurrency": 32}
QUICK: dict[str, Any] = {"loads": [0.5], "unloaded_jobs": 50, "duration_s": 0.5,
                         "capacity_jobs": 300, "concurrency": 32}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Unloaded everywhere but listpack; open-loop loads on the baseline only."""
    if variant.config == "listpack-1024":
        return []
    base = {"concurrency": options["concurrency"]}
    rows = [{"load": "unloaded", "jobs": options["unloaded_jobs"], **base}]
    if variant.primary:
        rows += [{"load": x, "duration_s": options["duration_s"],
                  "capacity_jobs": options["capacity_jobs"], **base} for x in options["loads"]]
    return rows


class Probe:
    """Handler-side state; ``count`` and ``handled`` are shared with the producer process."""

    def __init__(self, ctx: Any) -> None:
        self.tracker = Tracker()
        self.latencies: list[float] = []
        self.count = ctx.Value("q", 0)
        self.handled = ctx.Event()

    async def handler(self, job: Any) -> None:
        """Record the latency of measured jobs and count every call."""
        now = time.monotonic()
        payload = job.payload
        if payload.get("m"):
            self.latencies.append(now - payload["t"])
        self.tracker.handled(job.id)
        with self.count.get_lock():
            self.count.value += 1
        self.handled.set()


class Producer:
    """Producer-process side: sends jobs, waits on the shared handler count."""

    def __init__(self, queue: Any, count: Any, handled: Any) -> None:
        self.queue, self.count, self.handled = queue, count, handled
        self.ids: list[str] = []

    def send(self, intended: float, measured: bool) -> None:
        """Enqueue one job stamped with its intended send time."""
        self.ids.append(self.queue.enqueue("probe", {"t": intended, "m": measured}).id)

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` handler calls happened, or raise."""
        deadline = time.monotonic() + timeout
        while self.count.value < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.count.value} of {count} jobs reached a handler")
            time.sleep(0.0005)

    def unloaded(self, params: dict[str, Any]) -> dict[str, float]:
        """One job in flight at a time."""
        for _ in range(params["jobs"]):
            self.handled.clear()
            self.send(time.monotonic(), True)
            if not self.handled.wait(10):
                raise TimeoutError("a job did not reach its handler within 10 s")
        return {}

    def capacity(self, jobs: int) -> float:
        """Completions per second with this producer sending as fast as it can."""
        base = len(self.ids)
        start = time.monotonic()
        for _ in range(jobs):
            self.send(time.monotonic(), False)
        self.wait_for(base + jobs)
        return jobs / (time.monotonic() - start)

    def open_loop(self, params: dict[str, Any]) -> dict[str, float]:
        """Fixed arrival rate at ``load`` x capacity, timed from intended send times."""
        capacity = self.capacity(params["capacity_jobs"])
        rate = capacity * float(params["load"])
        n = max(int(rate * params["duration_s"]), 20)
        t0 = time.monotonic() + 0.01
        for i in range(n):
            intended = t0 + i / rate
            delay = intended - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.send(intended, True)
        offered = n / (time.monotonic() - t0)
        return {"capacity_jobs_per_s": capacity, "offered_per_s": offered}


def _producer_main(target: dict[str, Any], name: str, params: dict[str, Any],
                   shared: tuple[Any, Any, Any]) -> None:
    """Producer process: warm up, run the load, wait for every handler call, report.

    ``shared`` is (handler call counter, handled event, result pipe).
    """
    count, handled, conn = shared
    if target["parser"] == "python":
        sys.modules["hiredis"] = None  # type: ignore[assignment]
    from conveyor import Queue  # noqa: PLC0415 (after choosing the parser)

    queue = Queue.from_url(target["url"], name, **Target.from_dict(target).settings())
    producer = Producer(queue, count, handled)
    try:
        producer.send(time.monotonic(), False)  # connect, check the server, wake the worker
        producer.wait_for(1)
        mode = producer.unloaded if params["load"] == "unloaded" else producer.open_loop
        extra = mode(params)
        producer.wait_for(len(producer.ids))
        conn.send((producer.ids, extra, None))
    except Exception as exc:
        conn.send((producer.ids, {}, f"{type(exc).__name__}: {exc}"))
    finally:
        queue.close()


async def _measure(target: Target, params: dict[str, Any], probe: Probe, ctx: Any) -> dict:
    """Start the worker, run the producer process, stop the worker."""
    from conveyor import AsyncWorker  # noqa: PLC0415 (deliberately lazy)

    queue = make_async_queue(target, NAME)
    worker = AsyncWorker(queue, {"probe": probe.handler}, concurrency=params["concurrency"])
    task = asyncio.create_task(worker.run())
    recv, send = ctx.Pipe(duplex=False)
    shared = (probe.count, probe.handled, send)
    proc = ctx.Process(target=_producer_main, args=(target.to_dict(), queue.name, params, shared))
    proc.start()
    send.close()
    try:
        ids, extra, error = await asyncio.to_thread(recv.recv)
    finally:
        worker.stop()
        await task
        proc.join(10)
    probe.tracker.add(ids)
    if error:
        raise RuntimeError(f"producer failed: {error}")
    await acheck_counts(queue, waiting=0, active=0, total_completed=len(ids))
    await queue.aclose()
    return extra


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition of one load level."""
    ctx = multiprocessing.get_context("spawn")
    probe = Probe(ctx)
    preload_scripts(target.url)
    extra = asyncio.run(_measure(target, params, probe, ctx))
    report = probe.tracker.verify()
    metrics = {k: metric(v, "ms") for k, v in latency_summary(probe.latencies, QUANTILES).items()}
    metrics |= {k: metric(v, "1/s") for k, v in extra.items()}
    return {"metrics": metrics, "exactly_once": report,
            "extra": {"samples": len(probe.latencies)}}
