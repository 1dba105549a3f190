"""Regression tests of worker-lifecycle defects found in review, on both surfaces where they apply.

Each test failed on the code before its fix (see its docstring for what went wrong).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest
from _support import api_fixture, wait_until  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import AsyncWorker, Backoff, Conveyor, Job, SerializationError, Worker
from conveyor._runner import Runner

FAST = {"lease": 0.6, "backoff": Backoff(base=0.01), "maintenance_interval": 0.1}


async def _state(q, job_id: str) -> str | None:
    job = await q.get_job(job_id)
    return None if job is None else job.state


async def test_a_failure_whose_error_text_has_lone_surrogates_is_recorded_and_the_worker_goes_on(api):
    """An exception message with a lone surrogate (bytes decoded with surrogateescape: a file
    name) could not be encoded by the client, so the fail call raised ("worker pump error;
    retrying") again and again: the job stayed active for ever (its lease renewed by heartbeats)
    and the pump never acked nor claimed anything else: the next job was never run. (Fixed in
    QueueCore.fail, which now escapes the text; this checks the worker end to end.)"""
    q = api.queue(keep_failed=-1, keep_completed=-1, **FAST)
    bad = await q.enqueue("bad", None, max_attempts=1)
    ok = await q.enqueue("ok", None)

    def fail(job: Job) -> None:
        raise FileNotFoundError(b"/data/caf\xe9.csv".decode("utf-8", "surrogateescape"))

    w = api.worker(q, {"bad": api.handler(fail), "ok": api.handler(lambda job: "done")}, concurrency=1)

    async def settled() -> bool:
        return await _state(q, bad.id) == "failed" and await _state(q, ok.id) == "completed"

    deadline = time.monotonic() + 10
    while not await settled():
        assert time.monotonic() < deadline, f"jobs not settled: {w.state()}"
        w.check_alive()
        await asyncio.sleep(0.05)
    stored = await q.get_job(bad.id)
    assert stored is not None and "caf\\udce9.csv" in (stored.error or ""), stored.error
    w.stop()
    stats = await w.join(5)
    assert stats == {"processed": 1, "failed": 1, "held": 0}


@pytest.mark.parametrize("reason", ["timeout", "cancel"])
async def test_an_asyncio_handler_that_swallows_its_stop_is_settled_as_stopped(api, reason):
    """An async handler that catches the CancelledError of its time limit (or of a cancel) and
    returns was acked as completed: the hard limit was not enforced and a cancelled job ended
    completed, although Job.cancelled promises that what a stopped handler does is discarded."""
    if not api.is_async:
        pytest.skip("a thread handler is never interrupted: its outcome is dropped already")
    q = api.queue(keep_failed=-1, keep_completed=-1, **FAST)
    started: list[str] = []

    async def swallow(job: Job) -> str:
        started.append(job.id)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    limit = 0.3 if reason == "timeout" else None
    job = await q.enqueue("swallow", None, time_limit=limit, max_attempts=1)
    w = api.worker(q, {"swallow": swallow})
    await wait_until(lambda: started == [job.id], timeout=10, what="the handler to start")
    if reason == "cancel":
        assert await q.cancel(job.id) is True
    want = "failed" if reason == "timeout" else "cancelled"
    deadline = time.monotonic() + 10
    while (state := await _state(q, job.id)) not in ("completed", "failed", "cancelled"):
        assert time.monotonic() < deadline, w.state()
        await asyncio.sleep(0.05)
    assert state == want
    if reason == "timeout":
        stored = await q.get_job(job.id)
        assert "timed out: the attempt exceeded its time limit of 0.3 s" in (stored.error or "")
    w.stop()
    assert (await w.join(5))["processed"] == 0


async def test_an_asyncio_handler_that_raises_another_error_once_stopped_is_settled_as_timed_out(api):
    """A handler turning its time limit's CancelledError into another exception was failed with
    that exception's text and retry rule, not as timed out."""
    if not api.is_async:
        pytest.skip("asyncio only")
    q = api.queue(keep_failed=-1, keep_completed=-1, **FAST)

    async def convert(job: Job) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    job = await q.enqueue("convert", None, time_limit=0.3, max_attempts=1)
    w = api.worker(q, {"convert": convert})
    deadline = time.monotonic() + 10
    while await _state(q, job.id) != "failed":
        assert time.monotonic() < deadline, w.state()
        await asyncio.sleep(0.05)
    stored = await q.get_job(job.id)
    assert "timed out: the attempt exceeded its time limit of 0.3 s" in (stored.error or ""), stored.error


def _app(redis_url: str, queue_name: str, **settings) -> Conveyor:
    return Conveyor(redis_url, default_queue=queue_name, maintenance_interval=0.1,
                    backoff=Backoff(base=0.02, cap=0.05), keep_failed=-1, keep_completed=-1, **settings)


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["threads", "asyncio"])
def test_a_task_that_raises_system_exit_runs_the_failure_hooks(redis_url, queue_name, use_asyncio):
    """sys.exit() (or KeyboardInterrupt) in a task fails the attempt, but the failure hooks did not
    run: only ``except Exception`` called them. on_failure never saw a job that failed for good
    (and instrument()'s failed counter missed it, its start time kept for ever)."""
    app = _app(redis_url, queue_name, max_attempts=2)
    seen: list[tuple[str, str, int]] = []

    if use_asyncio:

        @app.after
        async def after(job: Job, result: object) -> None:  # an async hook: asyncio workers
            seen.append(("after", "", job.attempts))

    @app.on_retry
    def on_retry(job: Job, exc: BaseException) -> None:
        seen.append(("on_retry", type(exc).__name__, job.attempts))

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        seen.append(("on_failure", type(exc).__name__, job.attempts))

    @app.task
    def leave() -> None:
        sys.exit(3)

    job = leave.enqueue()
    stats = Runner(app, [queue_name], burst=True, concurrency=2).run()
    deadline = time.monotonic() + 10
    while (stored := app.queue(queue_name).get_job(job.id)).state != "failed":  # burst leaves a
        assert time.monotonic() < deadline  # retry in backoff to a later worker: run once more
        stats = Runner(app, [queue_name], burst=True, concurrency=2).run()
        time.sleep(0.05)
    assert stats[queue_name]["held"] == 0
    assert stored.attempts == 2
    assert seen == [("on_retry", "SystemExit", 1), ("on_failure", "SystemExit", 2)]
    app.close()


def test_an_asyncio_task_that_swallows_its_time_limit_runs_the_failure_hooks(redis_url, queue_name):
    """With hooks, a task that swallowed the CancelledError of its time limit and returned ran the
    ``after`` hooks (counted completed by instrument()) although its attempt is settled timed out."""
    app = _app(redis_url, queue_name, max_attempts=1)
    seen: list[str] = []

    @app.after
    async def after(job: Job, result: object) -> None:
        seen.append(f"after:{result}")

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        seen.append(f"on_failure:{type(exc).__name__}")

    @app.task(time_limit=0.3)
    async def stubborn() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    job = stubborn.enqueue()
    stats = Runner(app, [queue_name], burst=True, concurrency=1).run()
    stored = app.queue(queue_name).get_job(job.id)
    assert stored is not None and stored.state == "failed", stored
    assert "timed out" in (stored.error or "")
    assert seen == ["on_failure:TimeoutError"]
    assert stats[queue_name] == {"processed": 0, "failed": 1, "held": 0}
    app.close()


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["threads", "asyncio"])
def test_an_after_hook_that_raises_system_exit_does_not_fail_a_completed_job(
    redis_url, queue_name, use_asyncio
):
    """An exception in an ``after`` hook is logged and ignored (the outcome is decided), but one
    that is not an Exception (sys.exit() in a hook, say to recycle a worker) escaped the hook loop:
    the worker failed the attempt that had succeeded and retried it, so the task ran twice."""
    app = _app(redis_url, queue_name, max_attempts=3)
    runs: list[int] = []

    if use_asyncio:

        @app.before
        async def before(job: Job) -> None:  # an async hook: asyncio workers
            pass

    @app.after
    def after(job: Job, result: object) -> None:
        sys.exit(0)

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        raise KeyboardInterrupt  # not reached for this job; checked below for the failing one

    @app.task
    def once() -> str:
        runs.append(1)
        return "ok"

    job = once.enqueue()
    stats = Runner(app, [queue_name], burst=True, concurrency=1).run()
    stored = app.queue(queue_name).get_job(job.id)
    assert stored is not None and stored.state == "completed", stored
    assert runs == [1] and stats[queue_name]["processed"] == 1
    app.close()


@pytest.mark.parametrize("use_asyncio", [False, True], ids=["threads", "asyncio"])
def test_a_failure_hook_that_raises_system_exit_does_not_retry_a_job_failed_for_good(
    redis_url, queue_name, use_asyncio
):
    """An ``on_failure`` hook raising SystemExit replaced the task's error: a job failed for good
    (a SerializationError is never retried) was failed with the hook's SystemExit instead, which
    is retried: the task ran again, and its own error text was lost."""
    app = _app(redis_url, queue_name, max_attempts=3)
    runs: list[int] = []

    if use_asyncio:

        @app.before
        async def before(job: Job) -> None:
            pass

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        sys.exit(0)

    @app.task
    def broken() -> None:
        runs.append(1)
        raise SerializationError("the task's own error: a rerun fails the same way")

    job = broken.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    time.sleep(0.2)  # a retry (backoff 0.02 s) would be due by now
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    stored = app.queue(queue_name).get_job(job.id)
    assert stored is not None and stored.state == "failed", stored
    assert "SerializationError: the task's own error" in (stored.error or ""), stored.error
    assert runs == [1] and stored.attempts == 1
    app.close()


async def test_a_burst_lane_that_ended_does_not_take_the_wake_ups_of_the_lanes_still_running(api):
    """With two pumps and burst=True, a lane with nothing to do ends while the other still runs a
    job; the shared wait still handed every wake-up to the ended lane (its slots all free), so a
    job enqueued meanwhile waited for the running lane's handler to finish (or its block timeout)
    although that lane had free slots."""
    if not api.is_async:
        pytest.skip("pumps (lanes) are an AsyncWorker feature")
    q = api.queue(keep_completed=-1)
    started: dict[str, float] = {}

    async def long(job: Job) -> None:
        started["long"] = time.monotonic()
        await asyncio.sleep(0.3)
        await q.enqueue("short", None)  # a follow-up job, while this lane has a free slot
        await asyncio.sleep(4)

    async def short(job: Job) -> None:
        started["short"] = time.monotonic()

    await q.enqueue("long", None)
    w = AsyncWorker(q.inner, {"long": long, "short": short}, concurrency=4, pumps=2, burst=True,
                    block_timeout=10, install_signal_handlers=False)
    stats = await asyncio.wait_for(w.run(), 30)
    assert stats["processed"] == 2
    waited = started["short"] - started["long"] - 0.3
    assert waited < 2.0, f"the follow-up job started {waited:.2f} s after it was enqueued"


async def test_a_second_run_of_a_worker_is_refused_not_a_silent_no_op(api):
    """A worker's stop is final (set when run() ends), so a second run() of the same worker, a
    burst worker reused for the next batch say, returned at once with the old stats and ran
    nothing: the job enqueued for it stayed waiting, without a word."""
    q = api.queue(keep_completed=-1)
    cls = AsyncWorker if api.is_async else Worker
    w = cls(q.inner, {"t": api.handler()}, burst=True, install_signal_handlers=False)

    async def run() -> dict[str, int]:
        return (await w.run()) if api.is_async else await asyncio.to_thread(w.run)

    await q.enqueue("t", None)
    assert (await run())["processed"] == 1
    await q.enqueue("t", None)
    message = rf"{cls.__name__}\.run\(\) was called already: a worker runs once"
    with pytest.raises(RuntimeError, match=message):
        await run()


def test_a_sync_task_stopped_at_its_limit_during_an_async_before_hook_is_retried(redis_url, queue_name):
    """In an asyncio worker, a sync task whose time limit passed while an async ``before`` hook still
    ran never started in a thread, yet it was failed for good as "its handler thread was still
    running" (and on_failure ran): an attempt that never ran is retried, as documented."""
    app = _app(redis_url, queue_name, max_attempts=2)
    ran: list[int] = []
    seen: list[str] = []

    @app.before
    async def slow_first_time(job: Job) -> None:
        if job.attempts == 1:
            await asyncio.sleep(1.0)  # past the task's limit: the attempt is stopped here

    @app.on_retry
    def on_retry(job: Job, exc: BaseException) -> None:
        seen.append(f"on_retry:{type(exc).__name__}")

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        seen.append(f"on_failure:{type(exc).__name__}")

    @app.task(time_limit=0.3)
    def work() -> None:
        ran.append(1)

    job = work.enqueue()
    deadline = time.monotonic() + 15
    while (stored := app.queue(queue_name).get_job(job.id)).state not in ("completed", "failed"):
        assert time.monotonic() < deadline, stored
        Runner(app, [queue_name], burst=True, concurrency=1).run()  # burst leaves a backoff behind
        time.sleep(0.05)
    assert stored.state == "completed", stored.error
    assert (stored.attempts, ran, seen) == (2, [1], ["on_retry:TimeoutError"])
    app.close()


def test_a_sync_task_whose_attempt_was_stopped_during_a_before_hook_is_not_started(redis_url, queue_name):
    """In a thread worker, a job cancelled (or past its limit) while a ``before`` hook ran is settled
    at once, but the task was still called once the hooks returned: a job already reported
    cancelled went on to do its work (send the mail, charge the card)."""
    app = _app(redis_url, queue_name, max_attempts=1, lease=0.6)
    ran: list[str] = []
    seen: list[str] = []
    in_hook = threading.Event()

    @app.before
    def slow(job: Job) -> None:
        in_hook.set()
        deadline = time.monotonic() + 5
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)

    @app.on_failure
    def on_failure(job: Job, exc: BaseException) -> None:
        seen.append(type(exc).__name__)

    @app.task
    def charge() -> None:
        ran.append("charged")

    job = charge.enqueue()
    queue = app.queue(queue_name)
    canceller = threading.Thread(target=lambda: in_hook.wait(10) and queue.cancel(job.id))
    canceller.start()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    canceller.join(10)
    stored = queue.get_job(job.id)
    assert stored is not None and stored.state == "cancelled", stored
    time.sleep(0.2)  # the abandoned thread has returned from the hook by now
    assert ran == [] and seen == ["CancelledError"]
    app.close()
