"""tls: what TLS costs one caller enqueueing one job per call (``rediss://`` against ``redis://``).

Runs on Debian's redis-server 7.0 only (built with TLS). Each repetition starts a server with a
TLS port beside its plain one, certificates made by ``bench.tls``; the case ``tls: 1`` connects
through the TLS port, ``tls: 0`` through the plain one of the same server. Metrics and
exactly-once check as in scale-out's replicated cases: ``jobs_per_s``, ``p50_ms``, ``p99_ms``.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios._common import Target, Variant, queue_name
from bench.scenarios.enqueue_single import one_at_a_time
from bench.tls import TLS_KIND

NAME = "tls"
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
MAX_REPETITIONS = 3
WARMUP = 0
DEFAULTS: dict[str, Any] = {"tls": [0, 1], "min_seconds": 2.0, "payload_bytes": 64}
QUICK: dict[str, Any] = {"tls": [0, 1], "min_seconds": 0.3, "payload_bytes": 64}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Both cases on the baseline variant of the server built with TLS."""
    if not variant.primary or variant.server != TLS_KIND:
        return []
    return [{**options, "tls": flag} for flag in options["tls"]]


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition on a freshly started TLS-enabled server."""
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    from bench.tls import start_tls_server  # noqa: PLC0415

    with start_tls_server(target.server) as tls:
        url = tls.url() if params["tls"] else tls.server.url
        return one_at_a_time(Queue.from_url(url, queue_name(NAME), **target.settings()), params)
