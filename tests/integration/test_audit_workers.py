"""Regression tests of the workers found by an audit of their dispatch, hooks and shutdown.

Each test failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import pytest
from conveyor import AsyncQueue, AsyncWorker, Job, Queue, SerializationError
from conveyor._runner import Runner
from test_review_worker import _app


@pytest.mark.parametrize("hook", ["after", "on_failure"])
def test_an_async_hooks_own_cancelled_error_is_ignored_like_any_other_error(redis_url, queue_name, hook):
    """An exception in an ``after`` or ``on_failure`` hook is logged and ignored (the outcome is
    decided); an async hook that raised a CancelledError of its own (it awaited a future cancelled
    elsewhere; the worker had not cancelled it) escaped the hook loop and was taken for the
    attempt's failure, which is retried: a completed job ran again, and a job failed for good (a
    SerializationError is never retried) ran again with its own error text lost."""
    app = _app(redis_url, queue_name, max_attempts=3)
    runs: list[int] = []

    async def raising(job: Job, *_: object) -> None:
        raise asyncio.CancelledError("a future the hook awaited was cancelled")

    getattr(app, hook)(raising)

    @app.task
    def task() -> str:
        runs.append(1)
        if hook == "on_failure":
            raise SerializationError("the task's own error: a rerun fails the same way")
        return "ok"

    job = task.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    stored = app.queue(queue_name).get_job(job.id)
    assert stored is not None, job
    if hook == "after":
        assert stored.state == "completed", stored
    else:
        assert stored.state == "failed" and "the task's own error" in (stored.error or ""), stored
    assert runs == [1]
    app.close()


# A sync Worker run in the main thread with its own SIGTERM handler; its wake-up event sends the
# signal to the process while the pump (the main thread) holds the event's lock, and a job is
# running then: the handler runs at that point, as it can between any two bytecodes.
SIGNAL_WORKER = """
import os, signal, sys, threading, time
from conveyor import Queue, Worker

class SignalledWhileHeld(threading.Event):
    armed = False

    def clear(self):
        with self._cond:
            if SignalledWhileHeld.armed and threading.current_thread() is threading.main_thread():
                SignalledWhileHeld.armed = False
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs here, the lock still held
            self._flag = False

def slow(job):
    SignalledWhileHeld.armed = True
    time.sleep(0.5)
    return None

worker = Worker(Queue.from_url(sys.argv[1], sys.argv[2], keep_completed=-1), {"slow": slow},
                block_timeout=0.2)
worker._wake = SignalledWhileHeld()
print(worker.run(), flush=True)
"""


def test_sigterm_while_the_pump_holds_its_wake_up_lock_stops_the_worker(redis_url, queue_name, tmp_path):
    """A Worker's SIGTERM handler called stop(), which sets threading.Events; the handler runs in
    the main thread, which is the pump's, and a signal arriving while the pump held one of those
    events' plain Lock (waking from or clearing a wait: every idle block_timeout) made the handler
    wait for its own thread for ever. The worker hung, its maintenance thread still renewing the
    leases of the jobs it held: they never completed, nor were they redelivered."""
    script = tmp_path / "signal_worker.py"
    script.write_text(SIGNAL_WORKER)
    queue = Queue.from_url(redis_url, queue_name, keep_completed=-1)
    job = queue.enqueue("slow", None)
    returncode, out, err = _run_script(script, redis_url, queue_name)
    assert returncode == 0, f"the worker did not stop on SIGTERM: {out} {err}"
    stored = queue.get_job(job.id)
    assert stored is not None and stored.state == "completed", stored  # finished in the grace time
    assert "'processed': 1" in out, out
    queue.close()


def test_a_worker_of_an_app_without_tasks_says_so(tmp_path):
    """``conveyor worker`` of an app with no registered task (its tasks live in modules the app's
    module does not import) said "no queue to serve: name at least one", but naming a queue only
    got "queue 'x' has no registered task": the error must name the problem, the app's."""
    (tmp_path / "taskless.py").write_text(
        "from conveyor import Conveyor\napp = Conveyor('redis://127.0.0.1:1/0')\n"
    )
    command = [sys.executable, "-m", "conveyor", "worker", "taskless:app"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "no queue to serve: the app has no registered task" in result.stderr, result.stderr


def test_an_async_worker_gives_back_the_signal_handlers_it_replaced(redis_url, queue_name):
    """An AsyncWorker installs SIGTERM/SIGINT handlers for its run; when run() ended it removed
    them, which resets a signal to its default (SIGTERM: kill the process), so a handler the
    program had set before (a web server's graceful shutdown) was lost. The sync Worker
    restores the previous ones; the async twin now does the same."""
    def mine(*_: object) -> None:
        return None

    async def main() -> None:
        queue = AsyncQueue.from_url(redis_url, queue_name)
        await queue.enqueue("t", 1)

        async def handle(job: Job) -> None:
            return None

        await AsyncWorker(queue, {"t": handle}, burst=True).run()
        await queue.aclose()

    previous = {sig: signal.signal(sig, mine) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        asyncio.run(main())
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_an_async_handler_that_keeps_running_past_its_time_limit_is_not_run_twice(redis_url, queue_name):
    """An async handler that swallows the CancelledError of its time limit and goes on running:
    the server stops renewing a timed-out lease (extend.lua, status 3), and the worker waited for
    the handler to return before settling the attempt. The lease ran out meanwhile, lease
    recovery redelivered the job (attempts remained), and a second attempt started while the
    first still ran. Like a thread that cannot be interrupted, such an attempt is now settled
    failed, not retried, when its handler has not ended a third of a lease after it was asked."""
    starts: list[float] = []

    async def stubborn(job: Job) -> None:
        starts.append(time.monotonic())
        if len(starts) > 1:
            return
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(2.5)  # "cleanup" that outlives the lease

    async def main() -> Job | None:
        queue = AsyncQueue.from_url(redis_url, queue_name, lease=0.9, maintenance_interval=0.1,
                                    keep_failed=-1, keep_completed=-1)  # fmt: skip
        job = await queue.enqueue("t", None, time_limit=0.3, max_attempts=3)
        worker = AsyncWorker(queue, {"t": stubborn}, concurrency=2, install_signal_handlers=False)
        runner = asyncio.create_task(worker.run())
        await asyncio.sleep(3.5)
        worker.stop()
        await runner
        stored = await queue.get_job(job.id)
        await queue.aclose()
        return stored

    stored = asyncio.run(main())
    assert len(starts) == 1, f"the job started {len(starts)} times"
    assert stored is not None and stored.state == "failed", stored
    assert "still running" in (stored.error or ""), stored.error


# A Runner with a scheduler, run in the main thread with its signal handlers; when its burst ends
# it stops the scheduler, whose stop event sends SIGTERM to the process while the main thread
# holds the event's lock: the handler runs at that point, as it can between any two bytecodes.
SIGNAL_RUNNER = """
import os, signal, sys, threading, time
from conveyor import Conveyor
from conveyor._runner import Runner

class SignalledWhileHeld(threading.Event):
    def set(self):
        with self._cond:
            if threading.current_thread() is threading.main_thread() and not self._flag:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler runs here, the lock still held
            self._flag = True
            self._cond.notify_all()

app = Conveyor(sys.argv[1], default_queue=sys.argv[2])

@app.task
def tick() -> None:
    pass

app.periodic("hourly", tick, cron="0 * * * *")
runner = Runner(app, [sys.argv[2]], scheduler=True, burst=True)
runner.scheduler._stop = SignalledWhileHeld()
print(runner.run(), flush=True)
"""


def test_sigterm_while_the_runner_stops_its_scheduler_does_not_hang(redis_url, queue_name, tmp_path):
    """The Runner's SIGTERM handler called stop(), which sets the scheduler's threading.Event; the
    main thread sets that event too when run() ends, and a signal arriving while it held the
    event's plain Lock made the handler wait for its own thread for ever: the process hung at
    exit (a second signal still forced it out). The handler now only posts the request."""
    script = tmp_path / "signal_runner.py"
    script.write_text(SIGNAL_RUNNER)
    returncode, out, err = _run_script(script, redis_url, queue_name)
    assert returncode == 0, f"the runner hung at exit: {out} {err}"


def _run_script(script, *args: str) -> tuple[int, str, str]:
    """Run ``script`` in a fresh interpreter, killed after 20 s (a hang): (returncode, out, err)."""
    proc = subprocess.Popen([sys.executable, str(script), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out, err
