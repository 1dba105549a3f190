"""Audit of the operator surface (the conveyor command, metrics, inspection): each test failed before
its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conveyor import Queue
from conveyor._errors import ConnectionFailedError

SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]

APP_SOURCE = """
import os
from conveyor import Conveyor

app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"])

@app.task
def noop() -> None:
    pass
"""


@pytest.fixture
def app_module(tmp_path: Path) -> tuple[Path, str]:
    module = f"opapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE)
    return tmp_path, module


def _run(args: list[str], cwd: Path, url: str, queue: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEST_URL": url, "TEST_QUEUE": queue}
    env.pop("CONVEYOR_DEBUG", None)
    return subprocess.run(COMMAND + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_a_value_error_that_is_not_about_the_input_is_an_internal_error_with_its_traceback(
    redis_url, queue_name, app_module
):
    """main() took any ValueError or TypeError for bad input: a job hash holding a field that is
    not a number (written by another tool, or a bug) made `conveyor jobs` exit 2, the code of a
    usage error, with the bare "invalid literal for int()" and no traceback to find the fault."""
    cwd, module = app_module
    queue = Queue.from_url(redis_url, queue_name)
    job = queue.enqueue("noop", None)
    queue.client.hset(queue.core.keys.job(job.id), "a", "not-a-number")
    result = _run(["jobs", f"{module}:app", "-q", queue_name, "-s", "waiting"], cwd, redis_url, queue_name)
    queue.close()
    assert result.returncode == 1, result.stderr
    assert "Traceback" in result.stderr, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("conveyor: error: internal error") and "ValueError" in last, result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["retry", "{module}:app", "-q", "{queue}", "a{{b}}"], "job id 'a{{b}}' must not contain"),
    (["purge", "{module}:app", "-q", "{queue}", ""], "job id must not be empty"),
    (["worker", "{module}:app", "-q", "{queue}", "--block-timeout", "inf"], "block_timeout"),
    (["worker", "{module}:app", "-q", "ghost"], "queue 'ghost' has no registered task"),
    (["info", "{module}:app", "-q", "{queue},"], "has an empty name"),
    # -q "" (a script's -q "$QUEUES", the variable unset) was no -q: the worker served every queue
    (["worker", "{module}:app", "-q", "", "--burst"], "queue list '' has an empty name"),
    (["info", "{module}:app", "-q", ""], "queue list '' has an empty name"),
])
def test_bad_input_stays_one_line_and_exit_code_2(redis_url, queue_name, app_module, args, message):
    cwd, module = app_module
    argv = [a.format(module=module, queue=queue_name) for a in args]
    result = _run(argv, cwd, redis_url, queue_name)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("conveyor: error: ") and message.format() in result.stderr, result.stderr


def test_a_sentinel_that_finds_no_primary_is_one_readable_line(redis_url, app_module):
    """With no primary found, the error quoted redis-py's MasterNotFoundError whole: the repr of
    each Sentinel's client, pool and connection (every option, object addresses), over 1,000
    characters per Sentinel. It names the service and the Sentinels tried, with each one's reason."""
    cwd, module = app_module
    plain = urlsplit(redis_url).netloc.rpartition("@")[2]  # a server that is no Sentinel: it refuses SENTINEL
    url = f"redis+sentinel://admin:s3cret@127.0.0.1:1,{plain}/mymaster"
    result = _run(["info", f"{module}:app"], cwd, url, "q")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip()
    assert line.startswith("conveyor: error: no primary for Sentinel service 'mymaster'"), line
    assert "127.0.0.1:1" in line and plain in line and "s3cret" not in line, line
    assert "<redis." not in line and len(line) < 400, line
    queue = Queue.from_url("redis+sentinel://127.0.0.1:1/mymaster?password=s3cret", "q")
    with pytest.raises(ConnectionFailedError) as caught:
        queue.counts()
    assert "<redis." not in str(caught.value) and "s3cret" not in str(caught.value), caught.value
    assert "Connection refused" in str(caught.value) or "connecting" in str(caught.value), caught.value
    queue.close()


def test_instrument_does_not_read_the_queues_when_it_registers(caplog):
    """prometheus_client's global registry (auto_describe) calls a collector without describe()
    as it registers it: instrument() read every queue's depth from the server there, at worker
    start, before any scrape; a server out of reach meant a 'queue depth unavailable' warning per
    queue (and a connect timeout each) before the worker's own error."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from conveyor import Conveyor, instrument  # noqa: PLC0415
    from conveyor._prometheus import QueueDepth  # noqa: PLC0415

    app = Conveyor("redis://127.0.0.1:1/0", default_queue="q")

    @app.task
    def noop() -> None:
        pass

    registry = prometheus_client.CollectorRegistry(auto_describe=True)  # as prometheus_client.REGISTRY
    with caplog.at_level("WARNING"):
        instrument(app, registry)
    assert not [r for r in caplog.records if "unavailable" in r.getMessage()], caplog.text
    with pytest.raises(ValueError, match="Duplicated timeseries"):  # the names are still registered
        registry.register(QueueDepth(app))
    app.close()


def test_the_command_without_arguments_shows_its_help_as_it_is(tmp_path):
    """`conveyor` alone (click 8.2+ raises NoArgsIsHelpError, a UsageError, holding the help) printed
    the whole help text squeezed into one 'conveyor: error: Usage: ... Commands: info ...' line."""
    result = _run([], tmp_path, "redis://127.0.0.1:1/0", "q")
    assert result.returncode in (0, 2), result.stderr  # click 8.1 exits 0, later versions 2
    shown = result.stdout + result.stderr
    assert "conveyor: error:" not in shown, shown
    lines = shown.splitlines()
    assert lines[0].startswith("Usage: conveyor") and "Commands:" in lines, shown
    assert any(line.split()[:1] == ["worker"] for line in lines), shown


def test_the_span_of_a_job_given_back_at_the_shutdown_deadline_is_ended(redis_url, queue_name, caplog):
    """An asyncio worker cancels a job still running at its shutdown deadline and gives it back
    (the on_release hook; the outcome hooks do not run): the tracing hooks had no on_release, so
    that attempt's span was never ended, never exported, and stayed in the open-span map."""
    import asyncio  # noqa: PLC0415
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    from conveyor import Conveyor, instrument_tracing  # noqa: PLC0415
    from conveyor._runner import Runner  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: PLC0415

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = Conveyor(redis_url, default_queue=queue_name)
    tracing = instrument_tracing(app, provider)
    started = threading.Event()

    @app.task
    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    job = slow.enqueue()
    runner = Runner(app, [queue_name], concurrency=1, shutdown_timeout=0.2)
    thread = threading.Thread(target=runner.run)
    thread.start()
    assert started.wait(20)
    runner.stop()
    thread.join(20)
    assert not thread.is_alive()
    time.sleep(0.1)
    assert app.queue(queue_name).get_job(job.id).state == "waiting"  # given back
    spans = [s for s in exporter.get_finished_spans() if s.name == "conveyor.run slow"]
    assert len(spans) == 1 and spans[0].attributes["messaging.message.id"] == job.id, spans
    assert [e.name for e in spans[0].events] == ["conveyor.released"]
    assert not tracing._open and "detach" not in caplog.text, caplog.text
    app.close()


def test_jobs_help_says_that_parked_jobs_are_not_listed(tmp_path):
    """Jobs parked at their limit key's concurrency count as waiting in `info` but are not listed
    by `jobs -s waiting` (production.md, Parked, not polled); the help said only 'waiting in claim
    order', so 'waiting 4' in info and one job listed looked like lost jobs."""
    result = _run(["jobs", "--help"], tmp_path, "redis://127.0.0.1:1/0", "q")
    assert result.returncode == 0, result.stderr
    assert "parked" in " ".join(result.stdout.split()), result.stdout


def test_a_worker_serves_the_metrics_of_an_app_its_module_instrumented(redis_url, queue_name, tmp_path):
    """An app module that calls conveyor.instrument(app) (its web process exports the enqueue
    counters) run by `conveyor worker --metrics-port`: the second instrument() registered the same
    metric names in prometheus_client's global registry and the worker did not start ('Duplicated
    timeseries in CollectorRegistry', reported as bad input). instrument() of an app already
    instrumented on that registry returns its metrics."""
    pytest.importorskip("prometheus_client")
    import socket  # noqa: PLC0415

    module = f"opapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE + "\nimport conveyor\nconveyor.instrument(app)\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["worker", f"{module}:app", "-q", queue_name, "--burst", "--no-scheduler",
            "--metrics-port", str(port)]
    queue = Queue.from_url(redis_url, queue_name)
    queue.enqueue("noop", None)
    result = _run(args, tmp_path, redis_url, queue_name)
    assert result.returncode == 0, result.stderr
    assert queue.counts()["total_completed"] == 1
    queue.close()


def test_worker_help_tells_what_becomes_of_a_sync_task_still_running_at_the_deadline(tmp_path):
    """The help said running jobs past --shutdown-timeout are released; a sync task's job still
    running in its thread is not (a thread cannot be stopped): its lease expires and lease
    recovery redelivers it (production.md, Stopping without losing a job)."""
    result = _run(["worker", "--help"], tmp_path, "redis://127.0.0.1:1/0", "q")
    text = " ".join(result.stdout.split())
    assert result.returncode == 0 and "lease recovery" in text, text
    assert "releases the others" not in text and "the rest are released" not in text, text
