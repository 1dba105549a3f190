"""Prometheus metrics for an app: hook counters and queue depth (imported by ``instrument`` only).

Counters and the duration histogram are fed by the app's hooks in the worker process, labelled by
queue and task. Queue depth per state is read from the server when the registry is collected
(one pipeline per queue), so it is the same whichever worker is scraped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ._dispatch import RECOVERABLE, log
from ._models import Job

if TYPE_CHECKING:
    from ._app import Conveyor

DEPTH_STATES = ("waiting", "delayed", "active", "completed", "failed", "cancelled")


class QueueDepth(Collector):
    """Read from the server on collect: ``conveyor_queue_jobs{queue, state}`` (jobs per state),
    ``conveyor_queue_finished_total{queue, outcome}`` (jobs completed or failed since the queue was
    created, all workers together) and ``conveyor_queue_lease_recoveries_total{queue}`` (expired
    leases settled by lease recovery since then: redelivered, failed or cancelled)."""

    def __init__(self, app: Conveyor) -> None:
        self.app = app

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, CounterMetricFamily, CounterMetricFamily]:
        depth = GaugeMetricFamily(
            "conveyor_queue_jobs", "Jobs per queue and state.", labels=["queue", "state"]
        )
        finished = CounterMetricFamily(
            "conveyor_queue_finished", "Jobs finished per queue, all workers.", labels=["queue", "outcome"]
        )
        recoveries = CounterMetricFamily(
            "conveyor_queue_lease_recoveries",
            "Expired leases recovered per queue, all workers.",
            labels=["queue"],
        )
        return depth, finished, recoveries

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The names, without samples: without it the global registry (auto_describe) calls
        collect() as it registers the collector, reading every queue from the server."""
        yield from self._families()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        depth, finished, recoveries = self._families()
        for queue in self.app.queue_names():
            try:
                q = self.app.queue(queue)
                counts = q.counts()
                (recovered,) = q.client.hmget(q.core.keys.meta, ["recovered"])
            except RECOVERABLE as exc:
                log.warning("queue depth of %s unavailable (%s)", queue, exc)
                continue
            for state in DEPTH_STATES:
                depth.add_metric([queue, state], counts[state])
            finished.add_metric([queue, "completed"], counts["total_completed"])
            finished.add_metric([queue, "failed"], counts["total_failed"])
            recoveries.add_metric([queue], int(recovered or 0))
        yield depth
        yield finished
        yield recoveries


class Metrics:
    """The app's metrics in ``registry``; created by ``instrument()``."""

    def __init__(self, app: Conveyor, registry: CollectorRegistry) -> None:
        self.app, self.registry = app, registry
        labels = ["queue", "task"]
        self.enqueued = Counter(
            "conveyor_jobs_enqueued",
            "Jobs created by task.enqueue / aenqueue in this process.",
            labels,
            registry=registry,
        )
        self.completed = Counter(
            "conveyor_jobs_completed", "Task calls that succeeded.", labels, registry=registry
        )
        self.retried = Counter(
            "conveyor_jobs_retried", "Failed attempts that will be retried.", labels, registry=registry
        )
        self.failed = Counter("conveyor_jobs_failed", "Jobs that failed for good.", labels, registry=registry)
        self.duration = Histogram(
            "conveyor_job_duration_seconds",
            "Task call duration, success or failure.",
            labels,
            registry=registry,
        )
        registry.register(QueueDepth(app))
        self._started: dict[Job, float] = {}  # by attempt, as Tracing._open (see there)

    def _labels(self, job: Job) -> tuple[str, str]:
        task = self.app.tasks.get(job.task)
        return (task.queue if task else "", job.task)

    def _observe(self, job: Job) -> tuple[str, str]:
        labels = self._labels(job)
        started = self._started.pop(job, None)
        if started is not None:
            self.duration.labels(*labels).observe(time.perf_counter() - started)
        return labels

    def enqueued_job(self, queue: str, job: Job) -> None:
        self.enqueued.labels(queue, job.task).inc()

    def before(self, job: Job) -> None:
        self._started[job] = time.perf_counter()

    def after(self, job: Job, result: Any) -> None:
        self.completed.labels(*self._observe(job)).inc()

    def on_retry(self, job: Job, exc: BaseException) -> None:
        self.retried.labels(*self._observe(job)).inc()

    def on_failure(self, job: Job, exc: BaseException) -> None:
        self.failed.labels(*self._observe(job)).inc()

    def released(self, job: Job) -> None:
        """A started job given back at worker shutdown: no outcome, no duration; forget its start."""
        self._started.pop(job, None)


def instrument(app: Conveyor, registry: CollectorRegistry | None = None) -> Metrics:
    """Register metric hooks on ``app``; metrics go to ``registry`` (default: the global one).
    Once per app and registry: again, it returns the same metrics (registering the names twice
    fails)."""
    registry = REGISTRY if registry is None else registry
    return app._instrumented(("prometheus", registry), lambda: _install(app, Metrics(app, registry)))


def _install(app: Conveyor, metrics: Metrics) -> Metrics:
    app.enqueue_hooks.append(metrics.enqueued_job)
    app.before(metrics.before)
    app.hooks.add_uncut(app.hooks.after, metrics.after)
    app.hooks.add_uncut(app.hooks.on_retry, metrics.on_retry)
    app.hooks.add_uncut(app.hooks.on_failure, metrics.on_failure)
    app.hooks.add(app.hooks.on_release, metrics.released)
    return metrics
