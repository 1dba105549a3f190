"""`conveyor worker --metrics-scrape-timeout`: the queue-depth read's deadline of a scrape, which
the command line could not set (instrument()'s scrape_timeout, 3 s), bad values refused by name."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import COMMAND, _wait

from bench.servers import RunningServer, start_server

pytest.importorskip("prometheus_client")

APP_SOURCE = """
import contextlib
import os
from conveyor import Conveyor

app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"], socket_timeout=30)

@app.task
def noop() -> None:
    pass
"""
INSTRUMENTED = """
import conveyor
conveyor.instrument(app, scrape_timeout=float(os.environ["TEST_MODULE_TIMEOUT"]))
"""


@pytest.fixture
def own_server(server: RunningServer) -> Iterator[RunningServer]:
    """A fresh server of the session's kind, this test's to pause (never the shared one)."""
    with start_server(server.kind) as srv:
        try:
            yield srv
        finally:
            os.kill(srv.pid, signal.SIGCONT)


def _app(tmp_path: Path, instrumented: bool) -> str:
    module = f"metricsapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE + (INSTRUMENTED if instrumented else ""))
    return f"{module}:app"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(args: list[str], cwd: Path, url: str, queue: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TEST_URL": url, "TEST_QUEUE": queue, "TEST_MODULE_TIMEOUT": "8"}
    return subprocess.Popen(COMMAND + args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


@contextlib.contextmanager
def _reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc``, killed on the way out if it still runs (a failed assertion)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _scrape(port: int) -> tuple[float, str]:
    """Seconds the scrape took, and its text."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        return time.monotonic() - started, reply.read().decode()


def _serving(port: int) -> bool:
    try:
        _scrape(port)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("instrumented", [False, True], ids=["cli-instruments", "module-instrumented"])
def test_the_scrape_timeout_given_bounds_a_scrape_of_a_server_that_does_not_answer(
    own_server, tmp_path, queue_name, instrumented
):
    """--metrics-scrape-timeout 0.5: a scrape while the server does not answer takes about 0.5 s
    and reports the queue down, also where the app's module instrumented its app itself (with
    scrape_timeout 8 s: the command line's value replaces it, and the log says so)."""
    port = _free_port()
    args = ["worker", _app(tmp_path, instrumented), "--metrics-port", str(port),
            "--metrics-scrape-timeout", "0.5"]  # fmt: skip
    with _reaped(_command(args, tmp_path, own_server.url, queue_name)) as proc:
        _wait(lambda: proc.poll() is not None or _serving(port), 30, "the metrics server")
        assert proc.poll() is None, proc.communicate()
        os.kill(own_server.pid, signal.SIGSTOP)
        took, text = _scrape(port)
        os.kill(own_server.pid, signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=40)
    assert f'conveyor_queue_up{{queue="{queue_name}"}} 0.0' in text, text
    assert took < 2.5, f"the scrape took {took:.1f} s"
    assert proc.returncode == 0, stderr
    if instrumented:
        assert "--metrics-scrape-timeout 0.5 s replaces the scrape_timeout 8.0 s" in stderr, stderr


BAD_VALUES = [("0", "not in the range"), ("-1", "not in the range"), ("abc", "not a valid"),
              ("nan", "finite"), ("inf", "finite")]  # fmt: skip


@pytest.mark.parametrize(("value", "problem"), BAD_VALUES)
def test_a_bad_scrape_timeout_is_refused_naming_the_option(tmp_path, queue_name, value, problem):
    port = _free_port()
    args = ["worker", _app(tmp_path, False), "--metrics-port", str(port), "--metrics-scrape-timeout", value]
    proc = _command(args, tmp_path, "redis://127.0.0.1:1/0", queue_name)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "--metrics-scrape-timeout" in lines[0] and problem in lines[0], stderr


def test_a_scrape_timeout_without_a_metrics_port_is_refused(tmp_path, queue_name):
    """As --metrics-addr alone: nothing would be served, so the option would do nothing."""
    proc = _command(["worker", _app(tmp_path, False), "--metrics-scrape-timeout", "1"], tmp_path,
                    "redis://127.0.0.1:1/0", queue_name)  # fmt: skip
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 2, stderr
    assert "--metrics-scrape-timeout is given without --metrics-port" in stderr, stderr
