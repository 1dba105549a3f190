"""The Prometheus scrape is bounded and says what it could not read; instrument() applies to
workers built before it."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import conveyor
import pytest
from conveyor import AsyncWorker, Conveyor, Worker
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.servers import start_server

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def _samples(registry: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = prometheus_client.generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def own_server(server):
    """A fresh server of the session's kind, this test's to pause (never the shared one)."""
    with start_server(server.kind) as srv:
        yield srv


def test_a_scrape_of_a_server_that_does_not_answer_is_bounded_and_says_so(own_server, driver):
    """Each queue's depth was read at scrape time with the client's socket_timeout (10 s): two
    queues on a stopped server took 20 s, past Prometheus's 10 s scrape timeout, so the whole scrape
    failed, the process's own counters with it. Now one deadline bounds the reads, and
    conveyor_queue_up says which queues were not read."""
    app = Conveyor(own_server.url, default_queue="a", driver=driver)
    registry = prometheus_client.CollectorRegistry()
    conveyor.instrument(app, registry)

    @app.task
    def first() -> None:
        pass

    @app.task(queue="b")
    def second() -> None:
        pass

    first.enqueue()
    second.enqueue()
    up = {q: ("conveyor_queue_up", (("queue", q),)) for q in ("a", "b")}
    enqueued = ("conveyor_jobs_enqueued_total", (("queue", "a"), ("task", "first")))
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        samples = _samples(registry)
        took = time.monotonic() - started
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    assert took < 5, f"the scrape took {took:.1f} s"
    assert samples.get(up["a"]) == 0 and samples.get(up["b"]) == 0, samples
    assert samples[enqueued] == 1  # this process's counters are still reported
    waiting = ("conveyor_queue_jobs", (("queue", "a"), ("state", "waiting")))
    assert waiting not in samples  # not read: no depth at all rather than a stale or zero one
    deadline = time.monotonic() + 15
    while samples.get(up["a"]) != 1 and time.monotonic() < deadline:  # answering again: read again
        time.sleep(0.1)
        samples = _samples(registry)
    assert samples[up["a"]] == 1 and samples[up["b"]] == 1 and samples[waiting] == 1, samples
    app.close()


def test_scrape_timeout_must_be_positive(redis_url, queue_name):
    app = Conveyor(redis_url, default_queue=queue_name)
    # inf (or 10**400) was taken: a scrape then waited for a server that does not answer for good
    for bad in (0, -1.0, float("nan"), float("inf"), 10**400):
        with pytest.raises(ValueError, match="scrape_timeout must be a finite number of seconds > 0"):
            conveyor.instrument(app, prometheus_client.CollectorRegistry(), scrape_timeout=bad)


@pytest.mark.parametrize("mode", ["threads", "asyncio"])
def test_instrument_after_a_worker_was_built_counts_its_calls(redis_url, queue_name, mode):
    """A Worker built from app.handlers() before instrument() (an app with no hook yet) ran bare
    handlers: instrument() then counted none of its calls, and said nothing (instrument_tracing()
    traced none either)."""
    app = Conveyor(redis_url, default_queue=queue_name)
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))

    @app.task
    def work() -> None:
        pass

    registry = prometheus_client.CollectorRegistry()
    if mode == "threads":
        worker = Worker(app.queue(queue_name), app.handlers(queue_name), burst=True)
        conveyor.instrument(app, registry)
        conveyor.instrument_tracing(app, provider)
        work.enqueue()
        worker.run()
    else:

        async def main() -> None:
            worker = AsyncWorker(app.async_queue(queue_name), app.async_handlers(queue_name), burst=True)
            conveyor.instrument(app, registry)
            conveyor.instrument_tracing(app, provider)
            await work.aenqueue()
            await worker.run()
            await app.aclose()

        asyncio.run(main())
    labels = (("queue", queue_name), ("task", "work"))
    samples = _samples(registry)
    assert samples.get(("conveyor_jobs_completed_total", labels)) == 1
    assert samples.get(("conveyor_job_duration_seconds_count", labels)) == 1
    assert [span.name for span in spans.get_finished_spans()] == ["conveyor.run work"]
    app.close()


def test_a_depth_read_that_times_out_is_logged_as_a_read(own_server, caplog):
    """A scrape's read that failed before the deadline (socket_timeout shorter than scrape_timeout)
    was logged with a write's wording, 'the call may have been applied or not': it only reads."""
    app = Conveyor(own_server.url, default_queue="a", socket_timeout=0.3)
    registry = prometheus_client.CollectorRegistry()
    conveyor.instrument(app, registry, scrape_timeout=3)

    @app.task
    def first() -> None:
        pass

    first.enqueue()
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        with caplog.at_level("WARNING", logger="conveyor.worker"):
            samples = _samples(registry)
    finally:
        os.kill(own_server.pid, signal.SIGCONT)
    assert samples[("conveyor_queue_up", (("queue", "a"),))] == 0
    warning = next(r.getMessage() for r in caplog.records if "queue depth" in r.getMessage())
    assert "nothing was changed" in warning and "may have been applied" not in warning, warning
    app.close()
