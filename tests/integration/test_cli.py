"""The `conveyor` command: a worker on several queues stopped by SIGTERM, operator commands, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conveyor import Queue
from conveyor._models import JobSpec

SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]

APP_SOURCE = '''
import os, time
from pathlib import Path
from conveyor import Conveyor

Q = os.environ["TEST_QUEUE"]
OUT = Path(os.environ["TEST_OUT"])
app = Conveyor(os.environ["TEST_URL"], default_queue=Q + "-default", keep_failed=-1)

def record(line):
    with OUT.open("a") as f:
        f.write(line + "\\n")

@app.task(queue=Q + "-high")
def urgent(n: int) -> None:
    record(f"high {n}")

@app.task(max_attempts=1)
def broken() -> None:
    raise RuntimeError("broken on purpose")

@app.task
def slow(seconds: float) -> None:
    record("slow started")
    time.sleep(seconds)
    record("slow done")
'''
SYNC_TASK = '''
@app.task
def normal(n: int) -> None:
    record(f"default {n}")
'''
ASYNC_TASK = '''
@app.task
async def normal(n: int) -> None:
    record(f"default {n}")
'''


@pytest.fixture
def app_dir(tmp_path, request):
    mode = getattr(request, "param", "sync")
    module = f"cliapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE + (ASYNC_TASK if mode == "async" else SYNC_TASK))
    (tmp_path / "raising.py").write_text("raise RuntimeError('this module fails to import')\n")
    return tmp_path, module


def _env(url: str, queue: str, out: Path) -> dict[str, str]:
    return {**os.environ, "TEST_URL": url, "TEST_QUEUE": queue, "TEST_OUT": str(out)}


def _run(args, cwd, env, timeout=60):
    return subprocess.run(COMMAND + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def _sigterm_once_started(proc: subprocess.Popen, out: Path, timeout: float) -> tuple[str, float]:
    """SIGTERM once the slow job started; the worker's stderr and the seconds until it exited."""
    _wait(lambda: out.exists() and "slow started" in out.read_text(), 30, "the slow job to start")
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    _, stderr = proc.communicate(timeout=timeout)
    return stderr, time.monotonic() - signalled


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize("app_dir", ["sync", "async"], indirect=True)
def test_worker_serves_several_queues_and_stops_on_sigterm(redis_url, queue_name, app_dir):
    cwd, module = app_dir
    out = cwd / "out.txt"
    env = _env(redis_url, queue_name, out)
    high = Queue.from_url(redis_url, queue_name + "-high")
    default = Queue.from_url(redis_url, queue_name + "-default")
    proc = subprocess.Popen(
        [*COMMAND, "worker", f"{module}:app", "-q", f"{queue_name}-high,{queue_name}-default", "-c", "4",
         "--block-timeout", "30"],  # the shared idle wait must not hold up the stop
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        high.enqueue_many([JobSpec("urgent", {"args": [i]}) for i in range(5)])
        default.enqueue_many([JobSpec("normal", {"args": [i]}) for i in range(5)])
        default.enqueue("broken", None, max_attempts=1)
        _wait(lambda: high.counts()["total_completed"] == 5 and default.counts()["total_completed"] == 5
              and default.counts()["failed"] == 1, 60, "both queues processed")
        slow = default.enqueue("slow", {"args": [1.5]})
        stderr, stopped_after = _sigterm_once_started(proc, out, timeout=60)
    finally:
        _reap(proc)
    assert proc.returncode == 0, stderr
    assert stopped_after < 15, f"SIGTERM took {stopped_after:.1f} s with a 1.5 s job and a 30 s idle wait"
    assert "received SIGTERM: stopping gracefully" in stderr and "Traceback" not in stderr
    stored = default.get_job(slow.id)
    assert stored is None or stored.state == "completed"  # finished, not abandoned (keep_completed=0)
    assert default.counts()["total_completed"] == 6 and default.counts()["active"] == 0
    lines = sorted(out.read_text().splitlines())
    expected = [f"high {i}" for i in range(5)] + [f"default {i}" for i in range(5)]
    expected += ["slow started", "slow done"]
    assert lines == sorted(expected)

    info = _run(["info", f"{module}:app", "--json"], cwd, env)
    assert info.returncode == 0, info.stderr
    rows = {row["queue"]: row for row in map(json.loads, info.stdout.splitlines())}
    assert rows[queue_name + "-high"]["total_completed"] == 5 and rows[queue_name + "-default"]["failed"] == 1
    listed = _run(["jobs", f"{module}:app", "-q", default.name, "-s", "failed", "--json"], cwd, env)
    assert listed.returncode == 0, listed.stderr
    (row,) = map(json.loads, listed.stdout.splitlines())
    assert row["task"] == "broken" and row["error"] == "RuntimeError: broken on purpose"
    assert _run(["purge", f"{module}:app", "-q", default.name], cwd, env).returncode == 2  # ids or --all
    retried = _run(["retry", f"{module}:app", "-q", default.name, "--all"], cwd, env)
    assert retried.stdout.strip() == f"re-queued 1 failed job(s) of queue {default.name}", retried.stderr
    assert default.counts()["waiting"] == 1 and default.counts()["failed"] == 0
    burst = _run(["worker", f"{module}:app", "-q", default.name, "--burst"], cwd, env)
    assert burst.returncode == 0 and default.counts()["failed"] == 1, burst.stderr
    purged = _run(["purge", f"{module}:app", "-q", default.name, row["id"]], cwd, env)
    assert purged.stdout.strip() == f"deleted 1 failed job(s) of queue {default.name}", purged.stderr
    assert default.counts()["failed"] == 0 and default.get_job(row["id"]) is None
    table = _run(["info", f"{module}:app"], cwd, env)
    assert table.stdout.splitlines()[0].split()[:3] == ["queue", "waiting", "delayed"]
    high.close()
    default.close()


@pytest.mark.parametrize("app_dir", ["sync", "async"], indirect=True)
def test_prefetch_leases_jobs_beyond_the_running_ones(redis_url, queue_name, app_dir):
    """--prefetch 2 with one slot: while one slow job runs, two more are leased (three active);
    without the option only the running one is. Every job still runs once."""
    cwd, module = app_dir
    out = cwd / "out.txt"
    env = _env(redis_url, queue_name, out)
    default = Queue.from_url(redis_url, queue_name + "-default")
    for prefetch, held in ((0, 1), (2, 3)):
        out.unlink(missing_ok=True)
        default.enqueue_many([JobSpec("slow", {"args": [0.5]}) for _ in range(4)])
        proc = subprocess.Popen(
            [*COMMAND, "worker", f"{module}:app", "-q", default.name, "-c", "1", "--prefetch", str(prefetch),
             "--burst"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait(lambda: out.exists() and "slow started" in out.read_text(), 30, "the first job to start")
            active = default.counts()["active"]
            _, stderr = proc.communicate(timeout=60)
        finally:
            _reap(proc)
        assert proc.returncode == 0, stderr
        assert active == held, f"--prefetch {prefetch}: {active} jobs active while one ran"
        assert out.read_text().count("slow done") == 4 and default.counts()["waiting"] == 0
    default.close()


@pytest.mark.parametrize("app_dir", ["sync", "async"], indirect=True)
def test_a_second_signal_exits_at_once_with_code_3(redis_url, queue_name, app_dir):
    cwd, module = app_dir
    out = cwd / "out.txt"
    default = Queue.from_url(redis_url, queue_name + "-default")
    args = ["worker", f"{module}:app", "-q", default.name, "--shutdown-timeout", "120"]
    proc = subprocess.Popen([*COMMAND, *args], cwd=cwd, env=_env(redis_url, queue_name, out),
                            stderr=subprocess.PIPE, text=True)
    try:
        default.enqueue("slow", {"args": [120]})
        _wait(lambda: out.exists() and "slow started" in out.read_text(), 60, "the slow job to start")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        _reap(proc)
    assert proc.returncode == 3, stderr
    assert "received SIGINT again: exiting without waiting" in stderr and "Traceback" not in stderr
    assert default.counts()["active"] == 1  # still leased: lease recovery redelivers it later
    default.close()


@pytest.mark.parametrize(("args", "message"), [
    (["worker", "missing_module_xyz:app"], "cannot import module 'missing_module_xyz': ModuleNotFoundError"),
    (["worker", "raising:app"], "cannot import module 'raising': RuntimeError: this module fails to import"),
    (["worker", "{module}:nope"], "module '{module}' has no attribute 'nope'"),
    (["worker", "{module}"], "app path '{module}' must look like 'package.module:app'"),
    (["worker", "{module}:app", "-q", "ghost"], "queue 'ghost' has no registered task"),
    (["worker", "{module}:app", "-c", "0"], "Invalid value for '-c' / '--concurrency': 0 is not in"),
    (["worker", "{module}:app", "--prefetch", "-1"], "Invalid value for '--prefetch': -1 is not in"),
    (["worker", "{module}:app", "--prefetch", "2.5"], "'--prefetch': '2.5' is not a valid integer"),
    (["worker", "{module}:app", "--bogus"], "No such option '--bogus'"),
    (["frobnicate"], "No such command 'frobnicate'"),
])
def test_bad_input_is_one_line_and_exit_code_2(app_dir, args, message):
    cwd, module = app_dir
    env = _env("redis://127.0.0.1:1/0", "q", cwd / "out.txt")
    result = _run([a.format(module=module) for a in args], cwd, env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("conveyor: error: ")
    assert message.format(module=module) in result.stderr


def test_debug_shows_the_traceback_and_help_exits_0(app_dir):
    cwd, _ = app_dir
    result = _run(["worker", "missing_module_xyz:app", "--debug"], cwd, os.environ.copy())
    assert result.returncode != 0 and "Traceback" in result.stderr
    helped = _run(["worker", "--help"], cwd, os.environ.copy())
    assert helped.returncode == 0 and "--concurrency" in helped.stdout and "SIGTERM" in helped.stdout


def test_unreachable_server_is_exit_code_1(app_dir):
    cwd, module = app_dir
    url = "redis://admin:s3cret-pw@127.0.0.1:1/0"
    result = _run(["info", f"{module}:app"], cwd, _env(url, "q", cwd / "o"))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "127.0.0.1:1" in result.stderr and "s3cret-pw" not in result.stderr
    assert result.stderr.startswith("conveyor: error: ")


@pytest.mark.parametrize("tasks", ["sync", "async"])
def test_a_worker_exits_at_its_deadline_while_a_thread_task_runs_on(redis_url, queue_name, tmp_path, tasks):
    # A sync task runs in a thread, in the thread worker (an app of sync tasks) and in the asyncio
    # worker (an app with an async task); one still running at the deadline must not hold up the
    # exit (asyncio.run would wait for the executor's threads), which is code 0, and its job is
    # left to lease recovery (production.md: Exit codes, Stopping without losing a job).
    module = f"cliapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE + (SYNC_TASK if tasks == "sync" else ASYNC_TASK))
    out = tmp_path / "out.txt"
    default = Queue.from_url(redis_url, queue_name + "-default")
    proc = subprocess.Popen(
        [*COMMAND, "worker", f"{module}:app", "-q", default.name, "--shutdown-timeout", "0.5"],
        cwd=tmp_path, env=_env(redis_url, queue_name, out), stderr=subprocess.PIPE, text=True,
    )
    try:
        slow = default.enqueue("slow", {"args": [30]})
        stderr, stopped_after = _sigterm_once_started(proc, out, timeout=40)
    finally:
        _reap(proc)
    assert proc.returncode == 0, stderr
    assert stopped_after < 10, f"the exit waited {stopped_after:.1f} s for a 30 s thread"
    assert "slow done" not in out.read_text()
    stored = default.get_job(slow.id)
    assert stored is not None and stored.state == "active"  # its lease is kept: redelivered later
    if tasks == "sync":
        assert "handler(s) still running at the shutdown deadline" in stderr
    default.close()


@pytest.mark.parametrize("app_dir", ["sync", "async"], indirect=True)
@pytest.mark.parametrize("burst", [False, True])
def test_a_worker_that_cannot_reach_the_server_exits_1(app_dir, burst):
    cwd, module = app_dir
    url = "redis://admin:s3cret-pw@127.0.0.1:1/0"
    args = ["worker", f"{module}:app", *(["--burst"] if burst else [])]
    result = _run(args, cwd, _env(url, "q", cwd / "o"), timeout=30)
    assert result.returncode == 1, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("conveyor: error: ") and "127.0.0.1:1" in last, result.stderr
    assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [
    ["info", "-q", "q-high,ghost"], ["jobs", "-q", "ghost"], ["retry", "-q", "ghost", "--all"],
    ["purge", "-q", "ghost", "--all"],
])
def test_inspection_commands_refuse_a_queue_the_app_does_not_know(redis_url, app_dir, command):
    cwd, module = app_dir
    name, *rest = command
    result = _run([name, f"{module}:app", *rest], cwd, _env(redis_url, "q", cwd / "o"))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("conveyor: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "queue 'ghost' has no registered task (queues with tasks: q-default, q-high)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("url", [
    "redis://admin:s3cret/pw@127.0.0.1:1/0",  # an unencoded '/', '?' or '#' ends the address early
    "redis://admin:s3cret?pw@127.0.0.1:1/0",
    "redis://:s3cret#pw@127.0.0.1:1/0",
    "redis+cluster://admin:s3cret/pw@127.0.0.1:1/0",
    "redis+sentinel://admin:s3cret/pw@127.0.0.1:1/mymaster",
])
def test_a_url_whose_password_is_not_percent_encoded_is_refused_without_echoing_it(app_dir, url):
    """Before, the error echoed what urllib took for the port or host: the password's first part
    ("Port could not be cast to integer value as 's3cret'", "'admin:s3cret' is not host:port in
    redis+cluster://admin:s3cret/pw@...")."""
    cwd, module = app_dir
    result = _run(["info", f"{module}:app"], cwd, _env(url, "q", cwd / "o"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("conveyor: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "s3cret" not in result.stderr and "pw" not in result.stderr.replace("percent", ""), result.stderr
    assert "percent-encode" in result.stderr


@pytest.mark.parametrize(("option", "value"), [
    ("--block-timeout", "inf"), ("--block-timeout", "1e300"), ("--block-timeout", "nan"),
    ("--shutdown-timeout", "nan"),
])
def test_a_timeout_that_is_not_a_usable_number_of_seconds_is_bad_input(redis_url, queue_name, app_dir, option,
                                                                        value):
    """click's FloatRange lets inf and nan through. Before, --block-timeout inf or 1e300 ended a worker
    that had started with exit code 1 and an OverflowError ('cannot convert float infinity to
    integer'), nan with an error naming no option, and --shutdown-timeout nan was taken as no
    deadline at all."""
    cwd, module = app_dir
    args = ["worker", f"{module}:app", "-q", queue_name + "-default", "--no-scheduler", option, value]
    result = _run(args, cwd, _env(redis_url, queue_name, cwd / "o"), timeout=30)
    assert result.returncode == 2, result.stderr
    last = result.stderr.splitlines()[-1]
    name = option.removeprefix("--").replace("-", "_")
    assert last.startswith("conveyor: error: ") and name in last and repr(float(value)) in last, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("action", ["retry", "purge"])
def test_retry_and_purge_name_the_given_ids_that_were_not_failed(redis_url, queue_name, app_dir, action):
    """A mistyped or not-failed id was skipped silently ("re-queued 0 ..." and exit 0): an operator's
    script could not tell. Each skipped id is named with its state, and the exit code is 1."""
    cwd, module = app_dir
    env = _env(redis_url, queue_name, cwd / "out.txt")
    default = Queue.from_url(redis_url, queue_name + "-default")
    failed = default.enqueue("broken", None, max_attempts=1)
    burst = _run(["worker", f"{module}:app", "-q", default.name, "--burst"], cwd, env)
    assert burst.returncode == 0 and default.counts()["failed"] == 1, burst.stderr
    # it said "0 processed, 1 failed", also for a job that was retried: an attempt count, not jobs
    summary = f"queue {default.name}: 0 completed, 1 attempt(s) failed (retried or failed for good)"
    assert summary in burst.stderr
    waiting = default.enqueue("normal", {"args": [2]})
    done = _run([action, f"{module}:app", "-q", default.name, failed.id, waiting.id, "ghost-id"], cwd, env)
    verb = "re-queued" if action == "retry" else "deleted"
    assert done.stdout.strip() == f"{verb} 1 failed job(s) of queue {default.name}", done.stderr
    assert done.returncode == 1, done.stderr
    assert f"not failed, skipped: {waiting.id} (waiting), ghost-id (no such job)" in done.stderr
    assert default.counts()["failed"] == 0 and default.get_job(waiting.id).state == "waiting"
    default.close()


def test_jobs_lists_each_jobs_priority_in_claim_order(redis_url, queue_name, app_dir):
    """Waiting jobs are listed in claim order, which priorities decide: without a priority column
    the order looked arbitrary (ids 12, 11, 10) and an operator could not check a job's level."""
    cwd, module = app_dir
    env = _env(redis_url, queue_name, cwd / "out.txt")
    default = Queue.from_url(redis_url, queue_name + "-default")
    ids = [default.enqueue("normal", {"args": [p]}, priority=p).id for p in (0, 5, 9)]
    listed = _run(["jobs", f"{module}:app", "-q", default.name, "-s", "waiting", "--json"], cwd, env)
    assert [(row["id"], row["priority"]) for row in map(json.loads, listed.stdout.splitlines())] == [
        (ids[2], 9), (ids[1], 5), (ids[0], 0)]
    table = _run(["jobs", f"{module}:app", "-q", default.name, "-s", "waiting"], cwd, env)
    assert table.stdout.splitlines()[0].split() == ["id", "task", "state", "priority", "attempts", "error"]
    default.close()

