"""OpenTelemetry spans around task calls (imported by ``instrument_tracing`` only).

The enqueuing side injects the current context into the payload's ``trace`` field; the ``before``
hook extracts it, starts a consumer span with it as parent and makes that span current for the task
(threads and asyncio tasks alike: the hooks run in the task's own context); the ``after`` and
failure hooks end the span, with the exception recorded on failure; an attempt given back at the
worker's shutdown deadline (the internal on_release hook) ends it with a ``conveyor.released`` event.
"""

from __future__ import annotations

from contextvars import Token
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._models import Job

if TYPE_CHECKING:
    from ._app import Conveyor


class Tracing:
    """Span bookkeeping for one app: the open span and context token of each running attempt."""

    def __init__(self, app: Conveyor, tracer: trace.Tracer) -> None:
        self.app, self.tracer = app, tracer
        # By Job object (one per attempt, hashed by identity), not job id: a job redelivered while
        # an older attempt of it still runs in this process (a thread left running at a Worker's
        # shutdown deadline) has two attempts open, whose spans must not be crossed.
        self._open: dict[Job, tuple[trace.Span, Token[otel_context.Context]]] = {}

    @staticmethod
    def carrier() -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    @staticmethod
    def _parent(job: Job) -> otel_context.Context:
        """The enqueuing span's context from the job's payload; an unreadable one is ignored, as
        propagators ignore an invalid header: values that are not text (a payload another client
        wrote) made the propagator raise, failing every attempt of the job only because of tracing."""
        payload = job.payload
        carrier = payload.get("trace") if isinstance(payload, dict) else None
        if not isinstance(carrier, dict):
            carrier = {}
        return propagate.extract({k: v for k, v in carrier.items() if isinstance(v, str)})

    def _attributes(self, job: Job) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {
            "messaging.system": "conveyor",
            "messaging.message.id": job.id,
            "conveyor.task": job.task,
            "conveyor.attempt": job.attempts,
        }
        # The task's queue (OpenTelemetry messaging conventions' name for it), as the metrics'
        # queue label: an app's worker on a queue runs that queue's tasks only, so it is the
        # queue the job was claimed from (a claimed Job does not carry it).
        task = self.app.tasks.get(job.task)
        if task is not None:
            attributes["messaging.destination.name"] = task.queue
        return attributes

    def before(self, job: Job) -> None:
        parent = self._parent(job)
        span = self.tracer.start_span(
            f"conveyor.run {job.task}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=self._attributes(job),
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        self._open[job] = (span, token)

    def _end(self, job: Job, exc: BaseException | None) -> None:
        opened = self._open.pop(job, None)
        if opened is None:
            return
        span, token = opened
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()
        otel_context.detach(token)

    def after(self, job: Job, result: Any) -> None:
        self._end(job, None)

    def failed(self, job: Job, exc: BaseException) -> None:
        self._end(job, exc)

    def released(self, job: Job) -> None:
        """Given back at the worker's shutdown deadline: no outcome hook follows, so the span ends
        here (else it was never exported), marked by an event; the job runs again elsewhere."""
        opened = self._open.get(job)
        if opened is not None:
            opened[0].add_event("conveyor.released", {"reason": "worker shutdown deadline"})
        self._end(job, None)


def instrument(app: Conveyor, tracer_provider: Any = None) -> Tracing:
    """Once per app and tracer provider (None: the global one): again, the same Tracing."""
    tracer = trace.get_tracer("conveyor", tracer_provider=tracer_provider)
    return app._instrumented(("tracing", tracer_provider), lambda: _install(app, Tracing(app, tracer)))


def _install(app: Conveyor, tracing: Tracing) -> Tracing:
    app.trace_carrier = tracing.carrier
    app.before(tracing.before)
    app.hooks.add_uncut(app.hooks.after, tracing.after)
    app.hooks.add_uncut(app.hooks.on_retry, tracing.failed)
    app.hooks.add_uncut(app.hooks.on_failure, tracing.failed)
    app.hooks.add(app.hooks.on_release, tracing.released)
    return tracing
