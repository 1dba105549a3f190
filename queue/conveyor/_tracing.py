"""``instrument_tracing``: OpenTelemetry spans for an app's task calls, with the trace context carried
from the enqueuing process to the handler in the job's payload. opentelemetry-api (the ``otel``
extra) is imported only when it is called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import Conveyor


def instrument_tracing(app: Conveyor, tracer_provider: Any = None) -> object:
    """Trace every task call of ``app`` as a consumer span whose parent is the span that was current
    where the job was enqueued (W3C trace context, through the globally configured propagator).

    Spans come from ``tracer_provider`` (default: the global one); configure the SDK and exporter
    as for any OpenTelemetry application. Enqueues made outside a span carry no context. Once per
    app and provider: called again, it returns the same object (one span per task call), the app's
    span bookkeeping (typed ``object``: nothing in it is public).
    """
    try:
        from ._otel import instrument  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError(f"tracing needs the 'otel' extra: pip install 'conveyor[otel]' ({exc})") from exc
    return instrument(app, tracer_provider)
