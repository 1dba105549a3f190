"""Audit of what an operator observes of the workers (Prometheus metrics, OpenTelemetry spans, the
conveyor command): each test failed before its fix."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import conveyor
import pytest
from _support import run_in_thread
from conveyor import Conveyor, Queue, instrument_tracing
from conveyor._runner import Runner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

prometheus_client = pytest.importorskip("prometheus_client")


def _instrumented(app: Conveyor) -> tuple[InMemorySpanExporter, object, object, object]:
    """The app traced into an in-memory exporter and counted in a registry of its own:
    (exporter, registry, tracing, metrics)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = prometheus_client.CollectorRegistry()
    return exporter, registry, instrument_tracing(app, provider), conveyor.instrument(app, registry)


def _sample(registry: object, name: str, queue: str) -> float:
    value = registry.get_sample_value(name, {"queue": queue, "task": "work"})  # type: ignore[attr-defined]
    return value or 0.0


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize(("hook", "cut"), [
    ("after", "time limit"), ("after", "shutdown deadline"), ("on_failure", "shutdown deadline"),
])
def test_an_attempt_whose_async_hooks_the_worker_cut_is_still_counted_and_its_span_ended(
    redis_url, queue_name, hook, cut
):
    """An asyncio worker cancels an async after / on_failure hook still running when the job's
    time limit or the worker's shutdown deadline passes, and settles the outcome decided before
    (completed, failed). The hooks after it in the order were cut too: those of the metrics and
    the tracing, registered before the app's own hook, so they run after it. That attempt was
    not counted (no completed / failed, no duration) and its span was never ended nor exported,
    left in the open-span map for ever."""
    app = Conveyor(redis_url, default_queue=queue_name, max_attempts=1)
    exporter, registry, tracing, metrics = _instrumented(app)
    in_hook = threading.Event()

    async def slow_hook(job, _outcome):
        in_hook.set()
        await asyncio.sleep(30)

    getattr(app, hook)(slow_hook)

    @app.task(time_limit=0.5 if cut == "time limit" else None)
    async def work(fail: bool) -> None:
        if fail:
            raise RuntimeError("boom")

    job = work.enqueue(hook == "on_failure")
    runner = Runner(app, [queue_name], concurrency=1, shutdown_timeout=0.2)
    thread, outcome = run_in_thread(runner.run)
    assert in_hook.wait(20), "the hook started"
    queue = app.queue(queue_name)
    if cut == "time limit":
        _wait(lambda: queue.counts()["total_completed"] == 1, 20, "the job to complete")
    runner.stop()
    thread.join(20)
    assert outcome == [None], outcome
    state = "completed" if hook == "after" else "failed"
    assert queue.counts()[f"total_{state}"] == 1
    assert _sample(registry, f"conveyor_jobs_{state}_total", queue_name) == 1
    assert _sample(registry, "conveyor_job_duration_seconds_count", queue_name) == 1
    spans = [s for s in exporter.get_finished_spans() if s.name == "conveyor.run work"]
    assert [s.attributes["messaging.message.id"] for s in spans] == [job.id]
    assert spans[0].status.is_ok == (hook == "after")
    assert not tracing._open and not metrics._started  # type: ignore[attr-defined]
    app.close()


def test_two_attempts_of_one_job_in_one_process_get_a_span_and_a_duration_each(redis_url, queue_name):
    """A sync task's thread still running at a Worker's shutdown deadline keeps its job until the
    lease expires; a worker started again in the same process then runs the redelivered attempt
    beside it. The tracing and the metrics kept their state by job id: the second attempt's
    start replaced the first's, the first attempt's end ended the second attempt's span (detaching
    its context in another thread) and took its start time, so the first span was never ended
    and the second attempt's duration never observed."""
    app = Conveyor(redis_url, default_queue=queue_name, lease=0.6, maintenance_interval=0.1)
    exporter, registry, tracing, metrics = _instrumented(app)
    started = {1: threading.Event(), 2: threading.Event()}
    may_end = {1: threading.Event(), 2: threading.Event()}

    @app.task
    def work() -> None:
        attempt = conveyor.current_job().attempts
        started[attempt].set()
        assert may_end[attempt].wait(20)

    def finished() -> list:
        return [s for s in exporter.get_finished_spans() if s.name == "conveyor.run work"]

    work.enqueue()
    first = Runner(app, [queue_name], concurrency=1, shutdown_timeout=0.1)
    thread, outcome = run_in_thread(first.run)
    assert started[1].wait(20)
    first.stop()
    thread.join(20)
    second = Runner(app, [queue_name], concurrency=1)  # a worker started again in this process
    thread, outcome = run_in_thread(second.run)
    assert started[2].wait(20), "the expired lease was redelivered"
    may_end[1].set()
    _wait(lambda: len(finished()) == 1, 20, "the first attempt's after hooks")
    may_end[2].set()
    _wait(lambda: app.queue(queue_name).counts()["total_completed"] == 1, 20, "the second attempt")
    second.stop()
    thread.join(20)
    assert outcome == [None], outcome
    assert sorted(s.attributes["conveyor.attempt"] for s in finished()) == [1, 2]
    assert _sample(registry, "conveyor_job_duration_seconds_count", queue_name) == 2
    assert not tracing._open and not metrics._started  # type: ignore[attr-defined]
    app.close()


def test_a_job_failed_without_calling_its_task_runs_no_hook_and_is_not_counted(redis_url, queue_name):
    """production.md's Metrics table listed as uncounted by conveyor_jobs_failed_total only the
    jobs failed at a shutdown deadline or by lease recovery; a worker also fails, without calling
    the task nor any hook, a job of a task it does not know (a producer deployed before the
    workers) and one whose payload it cannot decode. Pinned as documented: only
    conveyor_queue_finished_total counts them."""
    app = Conveyor(redis_url, default_queue=queue_name, max_attempts=1)
    _, registry, _, _ = _instrumented(app)
    failures: list[str] = []
    app.on_failure(lambda job, exc: failures.append(job.id))

    @app.task
    def work() -> None:
        pass

    queue = app.queue(queue_name)
    unknown = queue.enqueue("ghost", None)
    garbled = work.enqueue()
    queue.client.hset(queue.core.keys.job(garbled.id), "d", b"\xff not json")
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    assert {queue.get_job(j.id).state for j in (unknown, garbled)} == {"failed"}
    assert failures == []
    assert _sample(registry, "conveyor_jobs_failed_total", queue_name) == 0
    outcome = {"queue": queue_name, "outcome": "failed"}
    assert registry.get_sample_value("conveyor_queue_finished_total", outcome) == 2  # type: ignore[attr-defined]
    app.close()


def test_only_jobs_a_task_enqueues_carry_the_trace_context(redis_url, queue_name):
    """production.md said tracing puts the trace context in each job's payload; a Queue (no app)
    cannot: a job enqueued by task name through it carries none, and its span is a root."""
    app = Conveyor(redis_url, default_queue=queue_name)
    exporter, _, _, _ = _instrumented(app)
    tracer = TracerProvider().get_tracer("test")

    @app.task
    def work() -> None:
        pass

    queue = app.queue(queue_name)
    with tracer.start_as_current_span("request"):
        by_task = work.enqueue()
        by_spec = queue.enqueue_many([work.spec()])[0]
        by_name = queue.enqueue("work", None)
    payloads = {job.id: queue.get_job(job.id).payload or {} for job in (by_task, by_spec, by_name)}
    assert ["trace" in payloads[job.id] for job in (by_task, by_spec, by_name)] == [True, True, False]
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    parents = {s.attributes["messaging.message.id"]: s.parent for s in exporter.get_finished_spans()}
    assert parents[by_name.id] is None and parents[by_task.id] is not None
    app.close()


@pytest.mark.parametrize("how", ["--debug", "CONVEYOR_DEBUG=1"])
@pytest.mark.parametrize(("args", "code"), [
    (["worker", "missing_module_xyz:app"], 2),  # bad input
    (["info", "--json", "-c"], 2),  # a usage error (click's)
    (["info", "APP"], 1),  # a runtime failure: the server cannot be reached
])
def test_debug_shows_the_traceback_and_keeps_the_exit_code_and_the_error_line(tmp_path, how, args, code):
    """With --debug or CONVEYOR_DEBUG=1 (an operator may leave it set in a service's environment)
    the error was re-raised out of main(): Python printed it and exited 1, so bad input was
    exit 1 instead of 2 (production.md's exit codes make no exception for --debug), and the
    'conveyor: error:' line was missing."""
    (tmp_path / "debugapp.py").write_text(
        "from conveyor import Conveyor\napp = Conveyor('redis://127.0.0.1:1/0')\n"
        "@app.task\ndef work() -> None:\n    pass\n"
    )
    env = {**os.environ, "CONVEYOR_DEBUG": "1" if how.startswith("CONVEYOR") else "0"}
    argv = [a.replace("APP", "debugapp:app") for a in args] + (["--debug"] if how == "--debug" else [])
    result = subprocess.run([sys.executable, "-m", "conveyor", *argv], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == code, result.stderr
    assert result.stderr.splitlines()[-1].startswith("conveyor: error: "), result.stderr
    if "missing" in args[1] or args[1] == "APP":
        assert "Traceback" in result.stderr, result.stderr


def test_a_trace_context_that_is_not_text_is_ignored_not_a_failure(redis_url, queue_name):
    """A payload's trace field is read by the propagator: one whose values are not strings (a
    producer that does not use Conveyor's tasks, such as another language's client) made the
    tracing's before hook raise (TypeError: object of type 'int' has no len()), so every attempt
    failed and the job failed for good, only because tracing was on. An unreadable context is
    ignored, as propagators ignore an invalid header: the span is a root."""
    app = Conveyor(redis_url, default_queue=queue_name, max_attempts=1)
    exporter, _, _, _ = _instrumented(app)

    @app.task
    def work() -> None:
        pass

    queue = app.queue(queue_name)
    job = queue.enqueue("work", {"trace": {"traceparent": 5, "baggage": 7}})
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    assert queue.counts()["total_completed"] == 1, queue.get_job(job.id).error
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "conveyor.run work"]
    assert span.parent is None and span.status.is_ok
    app.close()


TWO_QUEUES_APP = """
import os
from conveyor import Conveyor

app = Conveyor(os.environ["TEST_URL"])
Q = os.environ["TEST_QUEUE"]

@app.task(queue=Q + "-a")
def first() -> None:
    pass

@app.task(queue=Q + "-b")
def second() -> None:
    pass
"""


def _command(args: list[str], cwd, url: str, queue: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEST_URL": url, "TEST_QUEUE": queue}
    return subprocess.run([sys.executable, "-m", "conveyor", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize("command", ["worker", "info"])
def test_a_repeated_queues_option_adds_its_queues(redis_url, queue_name, tmp_path, command):
    """`-q a -q b` kept only the last (click's default for an option given twice): the worker
    served queue b alone, without a word about a, and info showed b alone."""
    (tmp_path / "twoqueues.py").write_text(TWO_QUEUES_APP)
    a, b = f"{queue_name}-a", f"{queue_name}-b"
    args = [command, "twoqueues:app", "-q", a, "-q", b]
    args += ["--burst", "--no-scheduler"] if command == "worker" else ["--json"]
    result = _command(args, tmp_path, redis_url, queue_name)
    assert result.returncode == 0, result.stderr
    if command == "worker":
        assert f"starting: queues {a}, {b}," in result.stderr, result.stderr
    else:
        assert [json.loads(line)["queue"] for line in result.stdout.splitlines()] == [a, b]


@pytest.mark.parametrize("command", [["purge", "--all"], ["retry", "--all"], ["jobs"]])
def test_a_one_queue_command_given_two_queues_is_bad_input_and_changes_nothing(
    redis_url, queue_name, tmp_path, command
):
    """`purge -q a -q b --all` purged queue b's failed jobs alone, nothing said about a (click keeps
    only the last of an option given twice): a command of one queue now refuses a second -q."""
    (tmp_path / "twoqueues.py").write_text(TWO_QUEUES_APP)
    a, b = f"{queue_name}-a", f"{queue_name}-b"
    queue = Queue.from_url(redis_url, b)
    queue.enqueue("second", None)
    assert queue.fail(queue.claim()[0], "broken", retry=False) == "failed"
    name, *rest = command
    result = _command([name, "twoqueues:app", "-q", a, "-q", b, *rest], tmp_path, redis_url, queue_name)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("conveyor: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert f"one queue, given 2 times ({a}, {b})" in result.stderr, result.stderr
    assert result.stdout == "" and queue.counts()["failed"] == 1
    queue.close()
