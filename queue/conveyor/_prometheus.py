"""Prometheus metrics for an app: hook counters and queue depth (imported by ``instrument`` only).

Counters and the duration histogram are fed by the app's hooks in the worker process, labelled by
queue and task. Queue depth per state is read from the server when the registry is collected
(``QueueDepth``: one pipeline for all queues, within ``scrape_timeout``), so it is the same
whichever worker is scraped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from ._metrics import DURATION_BUCKETS, SCRAPE_TIMEOUT
from ._models import Job
from ._queue_depth import QueueDepth
from ._settings_checks import finite

if TYPE_CHECKING:
    from ._app import Conveyor


class Metrics:
    """The app's metrics in ``registry``; created by ``instrument()``."""

    def __init__(
        self, app: Conveyor, registry: CollectorRegistry, scrape_timeout: float, buckets: Sequence[float]
    ) -> None:
        self.app, self.registry = app, registry
        labels = ["queue", "task"]
        # First: buckets prometheus_client refuses (unsorted) leave no name registered behind.
        self.duration = Histogram(
            "conveyor_job_duration_seconds",
            "Task call duration, success or failure.",
            labels,
            registry=registry,
            buckets=buckets,
        )
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
        self.depth = QueueDepth(app, scrape_timeout)  # its timeout: see _cli_metrics.serve_metrics
        registry.register(self.depth)
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


def instrument(
    app: Conveyor,
    registry: CollectorRegistry | None = None,
    *,
    scrape_timeout: float = SCRAPE_TIMEOUT,
    duration_buckets: Sequence[float] = DURATION_BUCKETS,
) -> Metrics:
    """Register metric hooks on ``app``; metrics go to ``registry`` (default: the global one).
    Once per app and registry: again, it returns the same metrics, with the first call's settings
    (registering the names twice fails)."""
    if not (finite(scrape_timeout) and scrape_timeout > 0):  # NaN: every queue reported down; inf:
        # a scrape waits for a server that does not answer for good
        raise ValueError(f"scrape_timeout must be a finite number of seconds > 0, got {scrape_timeout!r}")
    registry = REGISTRY if registry is None else registry
    return app._instrumented(
        ("prometheus", registry),
        lambda: _install(app, Metrics(app, registry, scrape_timeout, duration_buckets)),
    )


def _install(app: Conveyor, metrics: Metrics) -> Metrics:
    app.enqueue_hooks.append(metrics.enqueued_job)
    app.before(metrics.before)
    app.hooks.add_uncut(app.hooks.after, metrics.after)
    app.hooks.add_uncut(app.hooks.on_retry, metrics.on_retry)
    app.hooks.add_uncut(app.hooks.on_failure, metrics.on_failure)
    app.hooks.add(app.hooks.on_release, metrics.released)
    return metrics
