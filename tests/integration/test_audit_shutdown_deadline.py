"""How the `conveyor worker` command (a Runner) stops: its shutdown deadline counts from the stop
request, a second signal exits with code 3 whatever its standard streams are, and a SIGTERM or
SIGINT while it starts exits 0 at once (as PID 1 too)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from conveyor import Conveyor, Queue
from conveyor._runner import Runner

SOCKET_TIMEOUT = 2.0
SHUTDOWN_TIMEOUT = 0.2


@contextlib.contextmanager
def _writes_paused(url: str) -> Iterator[None]:
    admin = redis.Redis.from_url(url)
    admin.client_pause(8000, all=False)
    try:
        yield
    finally:
        admin.client_unpause()
        admin.close()


def _seconds_to_stop(runner: Runner, thread: threading.Thread) -> float:
    started = time.monotonic()
    runner.stop()
    thread.join(timeout=15)
    return time.monotonic() - started


@pytest.mark.parametrize("tasks", ["sync", "async"])
def test_a_stop_while_the_pump_waits_on_a_server_that_stopped_answering_keeps_its_deadline(
    server, redis_url, queue_name, tasks
):
    """The deadline was counted from when the pump noticed the stop: a pump stuck in a call to a
    server that stopped answering (writes paused, as in a failover) noticed it only when that call
    timed out, then started a new deadline and a new call, which timed out too. SIGTERM with
    --shutdown-timeout 2 took 18 s (two socket timeouts past the signal, not one), past a
    supervisor's grace period of --shutdown-timeout plus socket_timeout (production.md)."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: CLIENT PAUSE WRITE is checked on Redis and Valkey")
    app = Conveyor(redis_url, default_queue=queue_name, socket_timeout=SOCKET_TIMEOUT)
    if tasks == "sync":

        @app.task
        def idle() -> None:
            pass

    else:

        @app.task
        async def idle_async() -> None:
            pass

    runner = Runner(app, [queue_name], concurrency=1, shutdown_timeout=SHUTDOWN_TIMEOUT, block_timeout=0.05)
    thread = threading.Thread(target=runner.run)
    thread.start()
    time.sleep(1.0)
    with _writes_paused(redis_url):  # as in a failover: the idle pump's next call hangs at once
        time.sleep(0.3)
        took = _seconds_to_stop(runner, thread)
    assert not thread.is_alive()
    # the call in flight at the stop may take socket_timeout; the deadline passed before it ended
    assert took < SOCKET_TIMEOUT + SHUTDOWN_TIMEOUT + 0.5, f"run() returned {took:.1f} s after stop()"
    app.close()


SLOW_APP = """
import asyncio, os, time
from pathlib import Path
from conveyor import Conveyor

app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"])

@app.task
def slow() -> None:
    Path(os.environ["TEST_OUT"]).write_text("started")
    time.sleep(60)
"""
ASYNC_TASK = """
@app.task
async def other() -> None:
    await asyncio.sleep(0)
"""


@pytest.mark.parametrize("tasks", ["sync", "async"])
def test_a_second_signal_exits_with_code_3_when_stdout_is_closed(redis_url, queue_name, tmp_path, tasks):
    """The second signal's handler flushed sys.stdout before its os._exit: with the worker's fd 1
    closed (a daemon started with stdout closed, so sys.stdout is None) or a broken pipe, the flush
    raised in the signal handler, so the worker exited 1 with an internal error's traceback
    ("'NoneType' object has no attribute 'flush'") instead of 3."""
    module = f"stopapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(SLOW_APP + (ASYNC_TASK if tasks == "async" else ""))
    out = tmp_path / "out.txt"
    env = {**os.environ, "TEST_URL": redis_url, "TEST_QUEUE": queue_name, "TEST_OUT": str(out)}
    queue = Queue.from_url(redis_url, queue_name)
    args = [sys.executable, "-m", "conveyor", "worker", f"{module}:app", "--shutdown-timeout", "60"]
    closing_stdout = ["sh", "-c", 'exec "$@" >&-', "sh"]
    proc = subprocess.Popen(closing_stdout + args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        queue.enqueue("slow", None)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.exists(), "the slow job did not start"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        queue.close()
    assert proc.returncode == 3, stderr
    assert "received SIGTERM again" in stderr and "Traceback" not in stderr, stderr


SLOW_IMPORT_APP = """
import os, time
from pathlib import Path
from conveyor import Conveyor

Path(os.environ["TEST_OUT"]).write_text("importing")
time.sleep(30)
app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"])
"""


def _pid_1(args: list[str]) -> list[str] | None:
    """``args`` run as PID 1 of a new PID namespace (as in a container), or None if not allowed here."""
    unshare = ["unshare", "--fork", "--pid", "--kill-child"]
    try:
        ok = subprocess.run([*unshare, "true"], capture_output=True, timeout=10, check=False).returncode == 0
    except OSError:
        ok = False
    return [*unshare, *args] if ok else None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("pid", ["any", "1"])
def test_a_stop_signal_while_the_worker_starts_exits_at_once_with_code_0(redis_url, queue_name, tmp_path, pid,
                                                                          sig):
    """SIGTERM kept its default action until the Runner installed its handlers, after the app was
    imported and the server reached: the worker died of the signal, and as PID 1 (a container's
    worker in exec form, as production.md shows) the kernel dropped it, so the worker started anyway
    and ran until the supervisor's SIGKILL, its claimed jobs left to lease recovery. SIGINT (Ctrl-C,
    or a STOPSIGNAL) ended it with code 1 and a blank line on stderr (click's Abort)."""
    module = f"slowimport_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(SLOW_IMPORT_APP)
    out = tmp_path / "out.txt"
    env = {**os.environ, "TEST_URL": redis_url, "TEST_QUEUE": queue_name, "TEST_OUT": str(out)}
    args = [sys.executable, "-m", "conveyor", "worker", f"{module}:app"]
    if pid == "1":
        in_namespace = _pid_1(args)
        if in_namespace is None:
            pytest.skip("cannot create a PID namespace here (unshare needs CAP_SYS_ADMIN)")
        args = in_namespace
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        target = proc.pid if pid == "any" else int(subprocess.check_output(["pgrep", "-P", str(proc.pid)]))
        os.kill(target, sig)
        _, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert f"received {sig.name} before the worker started" in stderr and "Traceback" not in stderr, stderr
