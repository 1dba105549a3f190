"""Prometheus exporter: hook counters, duration histogram and queue depth, read back by the parser."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import conveyor
import pytest
from conveyor import Backoff, Conveyor
from conveyor._runner import Runner

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_exporter_counts_calls_and_reads_queue_depth(redis_url, queue_name):
    app = Conveyor(redis_url, default_queue=queue_name, keep_failed=-1, maintenance_interval=0.1,
                   backoff=Backoff(base=0.01, cap=0.02))  # fmt: skip
    registry = prometheus_client.CollectorRegistry()
    conveyor.instrument(app, registry)

    @app.task(max_attempts=2)
    def work(n: int) -> None:
        if n < 0:
            raise ValueError("negative")

    for n in (1, 2, 3, -1):
        work.enqueue(n)
    work.with_options(delay=60).enqueue(4)
    while app.queue(queue_name).counts()["failed"] == 0:
        Runner(app, [queue_name], burst=True, concurrency=2).run()

    samples = _samples(prometheus_client.generate_latest(registry).decode())
    labels = (("queue", queue_name), ("task", "work"))
    assert samples[("conveyor_jobs_enqueued_total", labels)] == 5
    assert samples[("conveyor_jobs_completed_total", labels)] == 3
    assert samples[("conveyor_jobs_retried_total", labels)] == 1
    assert samples[("conveyor_jobs_failed_total", labels)] == 1
    assert samples[("conveyor_job_duration_seconds_count", labels)] == 5
    depth = {state: samples[("conveyor_queue_jobs", (("queue", queue_name), ("state", state)))]
             for state in ("waiting", "delayed", "active", "failed")}  # fmt: skip
    assert depth == {"waiting": 0, "delayed": 1, "active": 0, "failed": 1}
    finished = (("outcome", "completed"), ("queue", queue_name))
    assert samples[("conveyor_queue_finished_total", finished)] == 3
    assert samples[("conveyor_queue_lease_recoveries_total", (("queue", queue_name),))] == 0
    app.close()


def test_exporter_counts_lease_recoveries(redis_url, queue_name):
    """A worker that died holding three leases: lease recovery settles them (one redelivered, one
    failed for lack of attempts, one cancelled meanwhile), and the server's total is what any
    worker exports, with the cancelled job in the depth gauge (it was missing)."""
    app = Conveyor(redis_url, default_queue=queue_name)
    registry = prometheus_client.CollectorRegistry()
    conveyor.instrument(app, registry)

    @app.task
    def work(n: int) -> None:
        pass

    queue = app.queue(queue_name)
    work.enqueue(1)
    work.with_options(max_attempts=1).enqueue(2)
    cancelled = work.enqueue(3)
    assert len(queue.claim(count=3, lease=0.05)) == 3  # and never acknowledged
    assert queue.cancel(cancelled.id)  # while active: it ends cancelled at lease recovery
    time.sleep(0.1)
    assert queue.recover() == (1, 2)  # one redelivered; one failed and one cancelled
    samples = _samples(prometheus_client.generate_latest(registry).decode())
    assert samples[("conveyor_queue_lease_recoveries_total", (("queue", queue_name),))] == 3
    assert samples[("conveyor_queue_jobs", (("queue", queue_name), ("state", "cancelled")))] == 1
    app.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_worker_serves_metrics_on_its_port(redis_url, queue_name, tmp_path):
    module = f"metricsapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import os\nfrom conveyor import Conveyor\n"
        "app = Conveyor(os.environ['TEST_URL'], default_queue=os.environ['TEST_QUEUE'])\n"
        "@app.task\ndef noop() -> None:\n    pass\n"
    )
    port = _free_port()
    env = {**os.environ, "TEST_URL": redis_url, "TEST_QUEUE": queue_name}
    proc = subprocess.Popen([*COMMAND, "worker", f"{module}:app", "--metrics-port", str(port)],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        conveyor.Queue.from_url(redis_url, queue_name).enqueue("noop", None)
        deadline, text = time.monotonic() + 60, ""
        while "conveyor_jobs_completed_total{" not in text and time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                    text = reply.read().decode()
            except OSError:
                continue
        samples = _samples(text)
        assert samples[("conveyor_jobs_completed_total", (("queue", queue_name), ("task", "noop")))] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr


def test_a_job_given_back_at_worker_shutdown_leaves_no_start_time_behind(redis_url, queue_name):
    """An AsyncWorker cancels handlers still running at its shutdown deadline and releases their
    jobs: no after, on_retry or on_failure hook runs for them. Before, the metrics kept the start
    time of each such job for ever (a leak in a process that runs workers again)."""
    import asyncio  # noqa: PLC0415

    from conveyor import AsyncWorker  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name)
    registry = prometheus_client.CollectorRegistry()
    metrics = conveyor.instrument(app, registry)

    @app.task
    async def slow() -> None:
        await asyncio.sleep(30)

    @app.task
    def slow_in_thread() -> None:
        time.sleep(0.5)

    job_ids = {slow.enqueue().id, slow_in_thread.enqueue().id}

    async def main() -> None:
        q = app.async_queue(queue_name)
        worker = AsyncWorker(q, app.async_handlers(queue_name), concurrency=2, shutdown_timeout=0.05)
        task = asyncio.create_task(worker.run())
        deadline = time.monotonic() + 10
        while {j.id for j in metrics._started} != job_ids and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert {j.id for j in metrics._started} == job_ids, "both jobs started"
        worker.stop()
        await task
        await app.aclose()

    asyncio.run(main())
    assert app.queue(queue_name).counts()["waiting"] == 1  # the async job was given back
    assert metrics._started == {}
    time.sleep(0.6)  # the thread's call returned meanwhile: no hook runs for it either
    assert metrics._started == {}
    samples = _samples(prometheus_client.generate_latest(registry).decode())
    durations = [v for (name, _), v in samples.items() if name == "conveyor_job_duration_seconds_count"]
    assert not any(durations)
    app.close()


def _buckets(registry: object, queue: str) -> list[str]:
    labels = (("queue", queue), ("task", "work"))
    return [dict(key[1])["le"] for key in _samples(prometheus_client.generate_latest(registry).decode())
            if key[0] == "conveyor_job_duration_seconds_bucket"
            and tuple(kv for kv in key[1] if kv[0] != "le") == labels]  # fmt: skip


def _one_call(redis_url: str, queue_name: str, **options: object) -> object:
    """The registry of an app instrumented with ``options`` after one call of its task."""
    app = Conveyor(redis_url, default_queue=queue_name)
    registry = prometheus_client.CollectorRegistry()
    conveyor.instrument(app, registry, **options)

    @app.task
    def work() -> None:
        pass

    work.enqueue()
    Runner(app, [queue_name], burst=True).run()
    app.close()
    return registry


def test_job_durations_have_buckets_for_background_jobs(redis_url, queue_name):
    """The duration histogram had prometheus_client's default buckets (up to 10 s): every job
    longer than that landed in +Inf. The default buckets now reach an hour."""
    registry = _one_call(redis_url, queue_name)
    assert {"0.01", "10.0", "60.0", "300.0", "3600.0", "+Inf"} <= set(_buckets(registry, queue_name))


def test_job_duration_buckets_can_be_chosen(redis_url, queue_name):
    registry = _one_call(redis_url, queue_name, duration_buckets=(0.5, 90))
    assert _buckets(registry, queue_name) == ["0.5", "90.0", "+Inf"]
    app = Conveyor(redis_url, default_queue=queue_name)
    unsorted = prometheus_client.CollectorRegistry()
    with pytest.raises(ValueError, match="sorted"):  # prometheus_client's own check
        conveyor.instrument(app, unsorted, duration_buckets=(90, 0.5))
    conveyor.instrument(app, unsorted)  # nothing was left registered by the refused call
