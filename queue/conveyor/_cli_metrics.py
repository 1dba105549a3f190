"""``conveyor worker --metrics-port``: the Prometheus endpoint of a worker, and its options' checks."""

from __future__ import annotations

import logging
import socket

import click

from ._app import Conveyor
from ._cli import BadInput
from ._errors import ConveyorError
from ._metrics import SCRAPE_TIMEOUT
from ._settings_checks import finite

log = logging.getLogger("conveyor.cli")


def finite_seconds(_ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    """click's FloatRange lets nan and inf through: nan disables every deadline check (a scrape
    would report each queue down), inf is no deadline at all."""
    if value is not None and not finite(value):
        raise click.BadParameter(f"must be a finite number of seconds > 0, got {value}")
    return value


scrape_timeout_option = click.option(
    "--metrics-scrape-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    callback=finite_seconds,
    help=f"Longest wait of a scrape for the queue depths read from the server, in seconds (with "
    f"--metrics-port; default {SCRAPE_TIMEOUT:g}, or what the app's module gave instrument()); keep "
    "it under Prometheus's scrape_timeout.",
)


def serve_metrics(app: Conveyor, address: str, port: int, scrape_timeout: float | None) -> None:
    """Instrument ``app`` (once: an app its module instrumented keeps its metrics) and serve them."""
    try:
        from prometheus_client import start_http_server  # noqa: PLC0415 - optional extra

        from ._prometheus import instrument  # noqa: PLC0415
    except ImportError as exc:
        raise BadInput(f"--metrics-port needs the 'prometheus' extra ({exc})") from exc
    metrics = instrument(app, scrape_timeout=scrape_timeout or SCRAPE_TIMEOUT)
    if scrape_timeout is not None and metrics.depth.timeout != scrape_timeout:
        # The app's module instrumented its app with its own: the operator's option is the last
        # word (ignored, it would leave scrapes failing past Prometheus's own timeout).
        log.info("metrics: --metrics-scrape-timeout %g s replaces the scrape_timeout %.1f s the app's "
                 "module gave instrument()", scrape_timeout, metrics.depth.timeout)  # fmt: skip
        metrics.depth.timeout = scrape_timeout
    try:
        start_http_server(port, addr=address)
    except socket.gaierror as exc:  # an address no resolver knows: the option is wrong
        raise BadInput(f"cannot serve metrics on {address}:{port}: {exc.strerror}") from exc
    except OSError as exc:  # in use, not permitted, not up yet: the same command may work later
        raise ConveyorError(f"cannot serve metrics on {address}:{port}: {exc.strerror}") from exc
    log.info("metrics on http://%s:%d/metrics (scrape_timeout %g s)", address, port, metrics.depth.timeout)
