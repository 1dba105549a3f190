"""``instrument``: Prometheus metrics for an app; prometheus_client (the ``prometheus`` extra) is
imported only when it is called, so Conveyor itself does not need it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import Conveyor

SCRAPE_TIMEOUT = 3.0  # seconds: well under Prometheus's default scrape timeout (10 s)
# Seconds, for background jobs: prometheus_client's defaults end at 10 s, so every longer job
# landed in +Inf. (+Inf is added by prometheus_client.)
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def instrument(
    app: Conveyor,
    registry: Any = None,
    *,
    scrape_timeout: float = SCRAPE_TIMEOUT,
    duration_buckets: Sequence[float] = DURATION_BUCKETS,
) -> object:
    """Count task calls (completed, retried, failed, duration) by queue and task through the app's
    hooks, and report queue depth per state read from the server at each scrape.

    Metrics go to the prometheus_client ``registry`` (default: its global registry). A scrape
    reads every queue of the app in one round trip, waiting at most ``scrape_timeout`` seconds:
    queues not read by then have ``conveyor_queue_up`` 0 and no depth, and the rest of the
    scrape is served. ``duration_buckets``: the upper bounds (seconds, sorted) of the task call
    duration histogram's buckets; the default reaches an hour.

    Once per app and registry: called again, it returns the same object, with the first call's
    settings. Returns the app's metrics bookkeeping, an internal object (typed ``object``: nothing
    in it is public).
    """
    try:
        from ._prometheus import instrument as register  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError(
            f"metrics need the 'prometheus' extra: pip install 'conveyor[prometheus]' ({exc})"
        ) from exc
    return register(app, registry, scrape_timeout=scrape_timeout, duration_buckets=duration_buckets)
