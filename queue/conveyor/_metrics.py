"""``instrument``: Prometheus metrics for an app; prometheus_client (the ``prometheus`` extra) is
imported only when it is called, so Conveyor itself does not need it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import Conveyor


def instrument(app: Conveyor, registry: Any = None) -> object:
    """Count task calls (completed, retried, failed, duration) by queue and task through the app's
    hooks, and report queue depth per state read from the server at each scrape.

    Metrics go to the prometheus_client ``registry`` (default: its global registry). Returns the
    app's metrics bookkeeping, an internal object (typed ``object``: nothing in it is public).
    """
    try:
        from ._prometheus import instrument as register  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError(
            f"metrics need the 'prometheus' extra: pip install 'conveyor[prometheus]' ({exc})"
        ) from exc
    return register(app, registry)
