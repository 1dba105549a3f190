"""OpenTelemetry: the enqueuing span's trace context arrives in the handler, sync and asyncio."""

from __future__ import annotations

import pytest
from conveyor import Conveyor, instrument_tracing
from conveyor._runner import Runner

# The test group installs the SDK: a missing SDK fails here, it must not skip silently in CI.
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_trace_context_travels_from_enqueue_to_handler(redis_url, queue_name, mode):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Conveyor(redis_url, default_queue=queue_name, max_attempts=1)
    instrument_tracing(app, provider)
    seen: dict[str, int] = {}

    def record(label: str) -> None:
        context = trace.get_current_span().get_span_context()
        seen[label] = context.trace_id
        if label == "boom":
            raise RuntimeError("boom")

    if mode == "async":
        @app.task
        async def work(label: str) -> None:
            record(label)
    else:
        @app.task
        def work(label: str) -> None:
            record(label)

    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("web request") as request:
        traced = work.enqueue("traced")
        work.enqueue("boom")
    untraced = work.enqueue("untraced")  # no current span: no context in the job
    assert "trace" in (app.queue(queue_name).get_job(traced.id).payload or {})
    assert "trace" not in (app.queue(queue_name).get_job(untraced.id).payload or {})

    stats = Runner(app, [queue_name], burst=True, concurrency=2).run()
    assert stats[queue_name]["processed"] == 2 and stats[queue_name]["failed"] == 1
    trace_id = request.get_span_context().trace_id
    assert seen["traced"] == trace_id and seen["boom"] == trace_id
    assert seen["untraced"] not in (0, trace_id)  # a root span of its own

    runs = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()
            if s.name == "conveyor.run work"}
    assert len(runs) == 3
    assert runs[traced.id].parent.span_id == request.get_span_context().span_id
    assert runs[traced.id].kind == trace.SpanKind.CONSUMER
    boom = next(s for s in runs.values() if s.status.status_code == trace.StatusCode.ERROR)
    assert boom.events[0].name == "exception"
    assert runs[untraced.id].parent is None
    app.close()


def test_instrumenting_an_app_twice_gives_one_span_per_task_call(redis_url, queue_name):
    """The app module may call instrument_tracing and a launcher call it again: the hooks were added
    twice, so every task call gave two spans (and two open-span entries)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Conveyor(redis_url, default_queue=queue_name)
    assert instrument_tracing(app, provider) is instrument_tracing(app, provider)

    @app.task
    def work() -> None:
        pass

    job = work.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    runs = [s for s in exporter.get_finished_spans() if s.name == "conveyor.run work"]
    assert [s.attributes["messaging.message.id"] for s in runs] == [job.id]
    app.close()


def test_a_task_calls_span_names_the_queue_it_came_from(redis_url, queue_name):
    """Spans carried the task and job id but not the queue: traces of several queues' workers
    could not be told apart or filtered by queue. They now carry the OpenTelemetry messaging
    attribute messaging.destination.name, the queue the worker claimed the job from."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Conveyor(redis_url, default_queue=queue_name)
    instrument_tracing(app, provider)

    @app.task
    def work() -> None:
        pass

    work.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "conveyor.run work"]
    assert span.attributes.get("messaging.destination.name") == queue_name
    app.close()
