"""The `conveyor` command against a server that does not answer, and Ctrl-C (SIGINT) while it waits:
what the operator is told, and the exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _holding_proxy import HoldingProxy
from conveyor import Queue
from conveyor._models import JobSpec
from test_cli import COMMAND, _wait

from bench.servers import RunningServer, start_server

APP_SOURCE = """
import os
from conveyor import Conveyor

app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"],
               socket_timeout=float(os.environ["TEST_SOCKET_TIMEOUT"]), keep_failed=-1)

@app.task(max_attempts=1)
def broken() -> None:
    raise RuntimeError("broken on purpose")
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/<pid>/fd")


@pytest.fixture
def own_server(server: RunningServer) -> Iterator[RunningServer]:
    """A fresh server of the session's kind, this test's to pause (never the shared one)."""
    with start_server(server.kind) as srv:
        yield srv


@pytest.fixture
def app(tmp_path: Path) -> tuple[Path, str]:
    module = f"cliapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(APP_SOURCE)
    return tmp_path, f"{module}:app"


def _start(args: list[str], cwd: Path, url: str, queue: str, socket_timeout: float) -> subprocess.Popen[str]:
    env = {**os.environ, "TEST_URL": url, "TEST_QUEUE": queue, "TEST_SOCKET_TIMEOUT": str(socket_timeout)}
    return subprocess.Popen(COMMAND + args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def _has_socket(proc: subprocess.Popen[str]) -> bool:
    """Whether the command opened its connection (it opens no other socket): past its imports."""
    if proc.poll() is not None:
        return True
    links = []
    for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile (the interpreter reads files as it starts)
            links.append(os.readlink(fd))
    return any(link.startswith("socket:") for link in links)


def _signalled(proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    """``sig`` once the command waits on the server: its exit code and stderr (killed if it did
    not exit within 10 s)."""
    try:
        _wait(lambda: _has_socket(proc), 30, "the command to connect")
        time.sleep(0.3)  # into its read
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stderr


@pytest.fixture
def paused(own_server: RunningServer) -> Iterator[RunningServer]:
    """``own_server`` stopped (SIGSTOP): it accepts connections and answers nothing."""
    os.kill(own_server.pid, signal.SIGSTOP)
    try:
        yield own_server
    finally:
        os.kill(own_server.pid, signal.SIGCONT)


def test_info_timing_out_says_the_read_changed_nothing(paused, app, queue_name):
    """'conveyor info' on a server that did not answer said "the call may have been applied or not
    (an enqueue with a job_id is safe to repeat)": an inspection changes nothing."""
    cwd, path = app
    proc = _start(["info", path], cwd, paused.url, queue_name, socket_timeout=0.5)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1, stderr
    assert "did not answer the read within socket_timeout" in stderr and "nothing was changed" in stderr
    assert "may have been applied" not in stderr


@pytest.mark.parametrize("command", [["info"], ["jobs", "-s", "waiting"], ["jobs"], ["purge", "--all"]])
def test_ctrl_c_while_the_server_does_not_answer_exits_130_saying_so(paused, app, queue_name, command):
    """Ctrl-C during info, jobs, retry or purge ended the command with exit code 1 and a blank line
    on stderr, as a failure would, and nothing said what was done."""
    cwd, path = app
    args = [command[0], path, *(["-q", queue_name] if command[0] != "info" else []), *command[1:]]
    code, stderr = _signalled(_start(args, cwd, paused.url, queue_name, socket_timeout=60))
    assert code == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("conveyor: interrupted (SIGINT)"), stderr
    if command[0] == "purge":
        assert f"no failed job of queue {queue_name} was deleted" in lines[0]


@pytest.mark.parametrize(("action", "verb"), [("retry", "re-queued"), ("purge", "deleted")])
def test_ctrl_c_between_batches_says_how_many_jobs_were_done(own_server, app, queue_name, action, verb):
    """Ctrl-C after the first of two batches (1000 failed jobs each) of retry/purge --all exited 1
    with a blank line: the operator could not tell that 1000 jobs were already re-queued/deleted."""
    q = Queue.from_url(own_server.url, queue_name)
    for _ in range(2):
        q.enqueue_many([JobSpec("broken", None, max_attempts=1) for _ in range(1000)])
        for job in q.claim(count=1000):
            q.fail(job, "boom")
    assert q.counts()["failed"] == 2000
    proxy = HoldingProxy(own_server.host, own_server.port)
    cwd, path = app
    url = f"redis://127.0.0.1:{proxy.port}/0"
    proc = _start([action, path, "-q", queue_name, "--all"], cwd, url, queue_name, socket_timeout=60)
    try:
        _wait(lambda: q.counts()["failed"] < 2000, 60, "the first batch")
        proxy.held.set()  # the second batch, delayed 0.1 s in the proxy, never reaches the server
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=10)
    finally:
        proxy.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    done = 2000 - q.counts()["failed"]
    assert done == 1000, stderr
    assert proc.returncode == 130, stderr
    assert stderr.strip() == (
        f"conveyor: interrupted (SIGINT): {done} failed job(s) of queue {queue_name} were already {verb} "
        "by the batches that completed (the batch in flight may have been applied too)"
    )
    q.close()


ASYNC_TASK = """
@app.task
async def later() -> None:
    pass
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("mode", ["threads", "asyncio"])
def test_a_stop_signal_during_the_workers_server_check_exits_at_once_with_code_0(paused, app, queue_name,
                                                                                 mode, sig):
    """The worker's start-up call to each queue (a server that does not answer) ran under the
    Runner's handlers: SIGTERM or SIGINT only asked the workers, not started yet, to stop, so the
    command waited out socket_timeout and then exited 1 ('did not answer the read'), where a signal
    before the worker started exits 0 at once."""
    cwd, path = app
    if mode == "asyncio":
        module = cwd / f"{path.partition(':')[0]}.py"
        module.write_text(module.read_text() + ASYNC_TASK)
    code, stderr = _signalled(_start(["worker", path], cwd, paused.url, queue_name, socket_timeout=60), sig)
    assert code == 0, stderr
    assert f"received {sig.name} before the worker started" in stderr and "Traceback" not in stderr, stderr
    assert f"({mode})" in stderr  # the mode asked for (the 'worker ... starting' line)
