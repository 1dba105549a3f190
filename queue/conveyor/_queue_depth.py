"""The queue-depth collector of ``instrument()``: every queue of the app read from the server at
scrape time, in one pipeline, within one deadline (``scrape_timeout``).

The read runs in a thread of its own and the scrape waits for it up to the deadline: a server that
does not answer would otherwise hold the scrape for the client's socket_timeout (10 s by default),
past Prometheus's own scrape timeout, failing the whole scrape, the process's counters with it.
Queues not read in time are reported by ``conveyor_queue_up`` 0 and no depth.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ._base import REDIS_ERRORS
from ._metrics import SCRAPE_TIMEOUT
from ._worker_errors import RECOVERABLE, log

if TYPE_CHECKING:
    from ._app import Conveyor

DEPTH_STATES = ("waiting", "delayed", "active", "completed", "failed", "cancelled")
Depth = tuple[dict[str, int], int]  # (counts() of the queue, its lease recoveries)
Families = tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily, CounterMetricFamily]


def read_depths(app: Conveyor, names: Sequence[str]) -> dict[str, Depth]:
    """Each queue's counts and lease recoveries, all queues in one pipeline (one round trip per
    server). A queue whose replies hold an error (a newer data layout, a key of another type) is
    left out, with a warning; a failed round trip raises."""
    if not names:
        return {}
    queues = [app.queue(name) for name in names]
    pipe = queues[0].client.pipeline(transaction=False)  # the app's queues share one server
    for q in queues:
        q._queue_counts(pipe)
        pipe.hmget(q.core.keys.meta, ["recovered"])
    closes = queues[0]._closes  # see QueueBase._error
    try:
        replies = pipe.execute(raise_on_error=False)
    except REDIS_ERRORS as exc:  # as counts() raises it: a ConveyorError naming the server
        raise queues[0]._error(exc, closes, read_only=True) from exc
    size = len(replies) // len(queues)
    depths: dict[str, Depth] = {}
    for n, q in enumerate(queues):
        mine = replies[n * size : (n + 1) * size]
        try:
            if failed := [r for r in mine if isinstance(r, Exception)]:
                raise failed[0]
            depths[q.name] = (q.core.parse_counts(mine[:-1]), int(mine[-1][0] or 0))
        except RECOVERABLE as exc:
            log.warning("queue depth of %s unavailable (%s)", q.name, exc)
    return depths


class QueueDepth(Collector):
    """Read from the server on collect: ``conveyor_queue_jobs{queue, state}`` (jobs per state),
    ``conveyor_queue_finished_total{queue, outcome}`` (jobs completed or failed since the queue was
    created, all workers together), ``conveyor_queue_lease_recoveries_total{queue}`` (expired
    leases settled by lease recovery since then: redelivered, failed or cancelled) and
    ``conveyor_queue_up{queue}`` (1: read at this scrape; 0: not, within ``timeout`` seconds)."""

    def __init__(self, app: Conveyor, timeout: float = SCRAPE_TIMEOUT) -> None:
        self.app, self.timeout = app, timeout
        self._lock = threading.Lock()
        self._reading: Future[dict[str, Depth]] | None = None

    @staticmethod
    def _families() -> Families:
        depth = GaugeMetricFamily(
            "conveyor_queue_jobs", "Jobs per queue and state.", labels=["queue", "state"]
        )
        up = GaugeMetricFamily(
            "conveyor_queue_up", "1 if the queue was read at this scrape, else 0.", labels=["queue"]
        )
        finished = CounterMetricFamily(
            "conveyor_queue_finished", "Jobs finished per queue, all workers.", labels=["queue", "outcome"]
        )
        recoveries = CounterMetricFamily(
            "conveyor_queue_lease_recoveries",
            "Expired leases recovered per queue, all workers.",
            labels=["queue"],
        )
        return depth, up, finished, recoveries

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The names, without samples: without it the global registry (auto_describe) calls
        collect() as it registers the collector, reading every queue from the server."""
        yield from self._families()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        depth, up, finished, recoveries = families = self._families()
        names = self.app.queue_names()
        depths = self._read(names)
        for queue in names:
            up.add_metric([queue], 1 if queue in depths else 0)
        for queue, (counts, recovered) in depths.items():
            for state in DEPTH_STATES:
                depth.add_metric([queue, state], counts[state])
            finished.add_metric([queue, "completed"], counts["total_completed"])
            finished.add_metric([queue, "failed"], counts["total_failed"])
            recoveries.add_metric([queue], recovered)
        yield from families

    def _read(self, names: list[str]) -> dict[str, Depth]:
        """The depths read within the deadline; none if the read did not end in time or failed."""
        with self._lock:
            # One read in flight at most: a read still waiting from an earlier scrape is waited
            # for again, not sent again, so a server that does not answer holds one thread and
            # one connection (until socket_timeout), not one more per scrape.
            if self._reading is None or self._reading.done():
                self._reading = _in_a_thread(read_depths, self.app, names)
            reading = self._reading
        try:
            return reading.result(timeout=self.timeout)
        except TimeoutError:
            log.warning("queue depth not read within scrape_timeout (%s s): queue_up 0", self.timeout)
        except RECOVERABLE as exc:
            log.warning("queue depth unavailable (%s)", exc)
        return {}


def _in_a_thread(fn: Any, *args: Any) -> Future[dict[str, Depth]]:
    """``fn(*args)`` in a daemon thread (a read blocked on a server that does not answer must not
    hold up the process's exit, as an executor's thread would)."""
    future: Future[dict[str, Depth]] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to the scrape waiting for it, which reports it
            future.set_exception(exc)

    threading.Thread(target=run, name="conveyor-queue-depth", daemon=True).start()
    return future
