"""Where results, time limits, cancellation, retries and worker shutdown meet: one final state per
job, a result waiter's answer that matches it, counts that agree, and no second run."""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import api_fixture, counts, wait_until  # noqa: F401 - api_fixture provides `api`
from conveyor import Backoff, Job, JobCancelledError, JobFailedError

FAST = {"lease": 0.9, "backoff": Backoff(base=0.01, jitter=0), "maintenance_interval": 0.1}


def _result(api, q, job_id: str, timeout: float = 10.0):
    """queue.result() on either surface, as an awaitable."""
    if api.is_async:
        return q.inner.result(job_id, timeout)
    return asyncio.to_thread(q.inner.result, job_id, timeout)


async def _state(q, job_id: str) -> str | None:
    job = await q.get_job(job_id)
    return None if job is None else job.state


def until_stopped(api, seen: list[str], then=None):
    """A handler that runs until the worker stops it (async: cancelled; sync: polls job.cancelled),
    then calls ``then(job)`` (which may raise or return)."""
    if api.is_async:

        async def async_long(job: Job):
            seen.append("start")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen.append("stopped")
                if then is None:
                    raise
                return then(job)
            return None

        return async_long

    def sync_long(job: Job):
        seen.append("start")
        deadline = time.monotonic() + 10
        while not job.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append("stopped")
        return then(job) if then is not None else None

    return sync_long


def _boom(job: Job):
    raise RuntimeError("boom after the stop")


@pytest.mark.parametrize("then", [None, _boom, lambda job: "returned"], ids=["stop", "raise", "return"])
async def test_a_cancelled_running_job_ends_cancelled_whatever_its_handler_does_then(api, then):
    q = api.queue(store_results=True, max_attempts=3, **FAST)
    seen: list[str] = []
    w = api.worker(q, {"long": until_stopped(api, seen, then)})
    job = await q.enqueue("long")
    waiter = asyncio.ensure_future(_result(api, q, job.id))
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    assert await q.cancel(job.id) is True
    with pytest.raises(JobCancelledError, match="cancelled while running"):
        await waiter
    await wait_until(lambda: seen == ["start", "stopped"], timeout=5, what="the handler to stop")
    await asyncio.sleep(0.5)  # a retry or redelivery would start it again by now
    assert seen == ["start", "stopped"]
    assert await _state(q, job.id) == "cancelled"
    assert await q.counts() == counts(cancelled=1)
    w.stop()
    await w.join(5)


async def test_a_cancel_then_a_time_limit_before_the_worker_learns_ends_cancelled(api):
    """The cancel is requested, then the attempt's time limit passes before the heartbeat that
    would tell the worker: settled as timed out, the fail finds the cancel and ends it cancelled."""
    q = api.queue(store_results=True, max_attempts=3, lease=6, maintenance_interval=0.1,
                  backoff=Backoff(base=0.01, jitter=0))  # heartbeats every 2 s
    seen: list[str] = []
    w = api.worker(q, {"long": until_stopped(api, seen)})
    job = await q.enqueue("long", time_limit=0.6)
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    assert await q.cancel(job.id) is True
    with pytest.raises(JobCancelledError):
        await _result(api, q, job.id)
    await asyncio.sleep(0.5)
    assert seen == ["start", "stopped"]
    assert await q.counts() == counts(cancelled=1)
    w.stop()
    await w.join(5)


async def test_a_waiter_started_before_a_timed_out_attempt_gets_the_retry_result(api):
    if not api.is_async:
        pytest.skip("a thread past its limit is failed, not retried")
    q = api.queue(store_results=True, max_attempts=2, keep_completed=10, **FAST)
    runs: list[int] = []

    async def flaky(job: Job):
        runs.append(job.attempts)
        if job.attempts == 1:
            await asyncio.sleep(30)
        return {"attempt": job.attempts}

    job = await q.enqueue("flaky", time_limit=0.3)
    waiter = asyncio.ensure_future(_result(api, q, job.id))
    await asyncio.sleep(0.05)
    w = api.worker(q, {"flaky": flaky})
    assert await waiter == {"attempt": 2}
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts) == ("completed", 2)
    assert await q.counts() == counts(completed=1, total_completed=1)
    assert runs == [1, 2]
    w.stop()
    await w.join(5)


async def test_a_thread_past_its_limit_at_shutdown_is_failed_once_and_its_waiter_told(api):
    if api.is_async:
        pytest.skip("an asyncio handler is cancelled at its limit")
    q = api.queue(store_results=True, max_attempts=3, **FAST)
    runs: list[int] = []

    def stuck(job: Job):
        runs.append(job.attempts)
        time.sleep(2.0)  # ignores job.cancelled
        return "late"

    w = api.worker(q, {"stuck": stuck}, shutdown_timeout=5)
    job = await q.enqueue("stuck", time_limit=0.3)
    waiter = asyncio.ensure_future(_result(api, q, job.id))
    await wait_until(lambda: runs == [1], timeout=10, what="the handler to start")
    w.stop()
    with pytest.raises(JobFailedError, match="timed out"):
        await waiter
    await w.join(10)
    await asyncio.sleep(2.5)
    assert runs == [1]
    assert await q.counts() == counts(failed=1, total_failed=1)


async def test_a_cancelled_asyncio_handler_that_keeps_running_does_not_hold_its_job_active(api):
    if not api.is_async:
        pytest.skip("a thread handler is settled at once when cancelled")
    q = api.queue(store_results=True, max_attempts=3, **FAST)
    seen: list[str] = []

    async def stubborn(job: Job) -> str:
        seen.append("start")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("swallowed")
            await asyncio.sleep(5)  # cleanup that takes long
        return "late"

    w = api.worker(q, {"stubborn": stubborn})
    job = await q.enqueue("stubborn")
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    t0 = time.monotonic()
    assert await q.cancel(job.id) is True
    with pytest.raises(JobCancelledError):
        await _result(api, q, job.id, timeout=4)
    assert time.monotonic() - t0 < 2
    assert await q.counts() == counts(cancelled=1)
    w.stop()
    await w.join(10)


@pytest.mark.parametrize("reason", ["timeout", "cancel"])
async def test_a_stopped_asyncio_handler_that_ends_at_once_logs_no_error_later(api, caplog, reason):
    """The check for a handler still running a third of a lease after its stop found the attempt
    settled (its token cleared by the fail) and raised LeaseLostError in a loop callback: asyncio
    logged 'Exception in callback' with a traceback for every timed-out job."""
    if not api.is_async:
        pytest.skip("asyncio only")
    q = api.queue(max_attempts=1, **FAST)
    seen: list[str] = []
    w = api.worker(q, {"long": until_stopped(api, seen)})
    job = await q.enqueue("long", time_limit=0.2 if reason == "timeout" else None)
    await wait_until(lambda: seen == ["start"], timeout=10, what="the handler to start")
    if reason == "cancel":
        assert await q.cancel(job.id) is True
    await wait_until(lambda: _state_in(q, job.id, ("failed", "cancelled")), timeout=5, what="the settling")
    await asyncio.sleep(FAST["lease"] / 3 + 0.3)  # past the check for a handler still running
    errors = [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert errors == [], [r.getMessage() for r in errors]
    w.stop()
    await w.join(5)


async def _state_in(q, job_id: str, states: tuple[str, ...]) -> bool:
    return await _state(q, job_id) in states


@pytest.mark.parametrize("where", ["parked", "rate", "backoff", "delayed"])
async def test_a_waiter_on_a_job_cancelled_before_its_next_run_returns_at_once(api, where):
    from conveyor import Limit  # noqa: PLC0415

    q = api.queue(store_results=True, max_attempts=3, lease=30, backoff=Backoff(base=60))
    if where == "parked":
        first = await q.enqueue("t", limit=Limit("k", concurrency=1))
        job = await q.enqueue("t", limit=Limit("k", concurrency=1))
        assert [j.id for j in await q.claim(2)] == [first.id]
    elif where == "rate":
        first = await q.enqueue("t", limit=Limit("k", rate=0.01))
        job = await q.enqueue("t", limit=Limit("k", rate=0.01))
        assert [j.id for j in await q.claim(2)] == [first.id]
    elif where == "backoff":
        job = await q.enqueue("t")
        [claimed] = await q.claim()
        assert await q.fail(claimed, "boom") == "retry"
    else:
        job = await q.enqueue("t", delay=60)
    waiter = asyncio.ensure_future(_result(api, q, job.id))
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    assert await q.cancel(job.id) is True
    with pytest.raises(JobCancelledError):
        await waiter
    assert time.monotonic() - t0 < 1


@pytest.mark.parametrize("reason", ["cancel", "timeout"])
async def test_a_prefetched_job_stopped_just_before_a_shutdown_is_settled_once(api, caplog, reason):
    """A claimed job that no slot started yet is stopped (its cancel arrives, or its time limit
    passes): its fail is queued; then stop() comes before the pump sent it. The stop gave the job
    back as well (release), so the queued fail was refused and logged as a lost lease."""
    q = api.queue(store_results=True, max_attempts=3, lease=3, maintenance_interval=0.1,
                  backoff=Backoff(base=60))
    ran: list[str] = []
    w = api.worker(q, {"t": api.handler(sleep=1.5, start=lambda job: ran.append(job.id))},
                   concurrency=1, prefetch=1, shutdown_timeout=5)
    d = w.worker._dispatch
    real_stop = d.stop

    def stop_then_shut_down(job, why):
        running = real_stop(job, why)
        w.worker.stop()  # before the pump sends the fail the stop queued
        return running

    d.stop = stop_then_shut_down
    first = await q.enqueue("t")
    await wait_until(lambda: ran == [first.id], timeout=10, what="the first job to start")
    second = await q.enqueue("t", time_limit=0.3 if reason == "timeout" else None)
    await wait_until(lambda: _state_in(q, second.id, ("active",)), timeout=5, what="the prefetch")
    if reason == "cancel":
        assert await q.cancel(second.id) is True
    await w.join(10)
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refused == []
    assert ran == [first.id]
    if reason == "cancel":
        assert await _state(q, second.id) == "cancelled"
        with pytest.raises(JobCancelledError):
            await _result(api, q, second.id, timeout=1)
    else:  # never started under its limit: given back, its attempt not counted
        stored = await q.get_job(second.id)
        assert (stored.state, stored.attempts) == ("waiting", 0), stored


async def test_a_buffered_job_cancelled_and_settled_does_not_keep_the_others_from_being_given_back(api):
    """A claimed job no slot started is cancelled and its fail sent (its token cleared); at stop,
    giving back the buffered jobs raised on it (no token), so the others were not given back:
    left active until lease recovery ran them again, their unstarted attempt counted."""
    q = api.queue(lease=1.5, maintenance_interval=0.1)  # heartbeats every 0.5 s
    ran: list[str] = []
    w = api.worker(q, {"t": api.handler(sleep=2.5, start=lambda job: ran.append(job.id))},
                   concurrency=1, prefetch=2, shutdown_timeout=5)
    first = await q.enqueue("t")
    await wait_until(lambda: ran == [first.id], timeout=10, what="the first job to start")
    cancelled, other = await q.enqueue("t"), await q.enqueue("t")
    await wait_until(lambda: _state_in(q, other.id, ("active",)), timeout=5, what="the prefetch")
    assert await q.cancel(cancelled.id) is True
    await wait_until(lambda: _state_in(q, cancelled.id, ("cancelled",)), timeout=2, what="the cancel")
    w.stop()
    await w.join(10)
    assert ran == [first.id]
    stored = await q.get_job(other.id)  # given back unstarted (its attempt refunded), not recovered
    assert (stored.state, stored.attempts) == ("waiting", 0)


async def test_a_job_in_retry_backoff_at_a_shutdown_is_finished_by_the_next_worker(api):
    q = api.queue(store_results=True, max_attempts=3, lease=30, maintenance_interval=0.1,
                  backoff=Backoff(base=0.5, jitter=0))
    runs: list[int] = []

    def flaky(job: Job):
        runs.append(job.attempts)
        if job.attempts == 1:
            raise RuntimeError("first attempt fails")
        return job.attempts

    job = await q.enqueue("flaky")
    waiter = asyncio.ensure_future(_result(api, q, job.id))
    w = api.worker(q, {"flaky": api.handler(flaky)}, shutdown_timeout=5)
    await wait_until(lambda: _state_in(q, job.id, ("delayed",)), timeout=10, what="the retry backoff")
    w.stop()
    await w.join(5)
    assert await q.counts() == counts(delayed=1)
    api.worker(q, {"flaky": api.handler(flaky)})
    assert await waiter == 2
    assert runs == [1, 2]
    assert await q.counts() == counts(total_completed=1)


@pytest.mark.parametrize("retry", ["no", None, 0, 1])
async def test_fail_refuses_a_retry_flag_that_is_not_a_bool(api, retry):
    """retry='no' retried the job (truthy) and None or 0 failed it for good, silently; release()
    already refuses a started flag that is not a bool."""
    q = api.queue(max_attempts=3)
    job = await q.enqueue("t")
    [claimed] = await q.claim()
    with pytest.raises(TypeError, match=f"retry must be True or False, got {retry!r}"):
        await q.fail(claimed, "boom", retry=retry)
    assert await _state(q, job.id) == "active"
    assert await q.fail(claimed, "boom", retry=False) == "failed"


async def test_a_heartbeat_during_a_shutdown_release_warns_of_no_lost_lease(api, caplog, monkeypatch):
    """stop() gives a claimed job back (release); a heartbeat sent while that release was in
    flight found the job no longer held and warned 'lease of job ... lost', though the worker
    itself had just given it back."""
    from conveyor._scripts import Scripts  # noqa: PLC0415
    from test_shutdown_defects import _wrap_run  # noqa: PLC0415

    q = api.queue(lease=1.5, maintenance_interval=0.1)  # a job is heartbeated every ~0.4 s
    ran: list[str] = []

    if api.is_async:

        async def after(call, reply):
            if call.script is Scripts.RELEASE.value:
                await asyncio.sleep(1.0)  # the next heartbeat comes before the pump goes on
    else:

        def after(call, reply):
            if call.script is Scripts.RELEASE.value:
                time.sleep(1.0)

    _wrap_run(monkeypatch, api, after)
    w, first, second = await _one_running_one_prefetched(api, q, ran, sleep=2.0)
    w.stop()
    await w.join(10)
    lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert lost == []
    assert ran == [first.id]
    assert await _state(q, second.id) == "waiting"


async def test_a_last_attempt_stopped_at_the_shutdown_deadline_ends_failed_never_reruns(api):
    """An asyncio handler cancelled at the shutdown deadline on its last attempt was given back
    (release, the attempt counted) and the next worker ran it again as attempt 2 of 1; a thread
    still running there is left to lease recovery, which fails it. Both end failed, run once."""
    q = api.queue(store_results=True, max_attempts=1, keep_failed=10, **FAST)
    runs: list[int] = []

    async def async_long(job: Job) -> None:
        runs.append(job.attempts)
        await asyncio.sleep(30)

    def sync_long(job: Job) -> None:
        runs.append(job.attempts)
        time.sleep(1.5)  # past the deadline, not interruptible

    long = async_long if api.is_async else sync_long
    w = api.worker(q, {"long": long}, shutdown_timeout=0.2)
    job = await q.enqueue("long")
    await wait_until(lambda: runs == [1], timeout=10, what="the handler to start")
    w.stop()
    await w.join(10)
    api.worker(q, {"long": long})  # runs a redelivery, or recovers the expired lease
    with pytest.raises(JobFailedError, match="after attempt 1 of 1") as failed:
        await _result(api, q, job.id, timeout=10)
    assert failed.value.attempts == 1
    await asyncio.sleep(0.5)  # a rerun would have started by now
    assert runs == [1]
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts) == ("failed", 1), stored
    assert await q.counts() == counts(failed=1, total_failed=1)


async def test_release_of_a_started_job_on_its_last_attempt_fails_it(api):
    """The raw release(started=True), the path of a worker's shutdown, gave back a job whose
    attempts were used up: claimed again as attempt 2 of 1."""
    q = api.queue(max_attempts=1, keep_failed=10)
    job = await q.enqueue("t")
    [claimed] = await q.claim()
    assert await q.release([claimed], started=True) == [3]
    assert await q.claim() == []
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts) == ("failed", 1), stored
    assert "shutdown after attempt 1 of 1" in (stored.error or "")
    assert await q.counts() == counts(failed=1, total_failed=1)


async def _one_running_one_prefetched(api, q, ran: list[str], sleep: float):
    """A worker of one slot and one prefetch: the first job running (``sleep`` s), the second
    claimed but not started. Returns (worker, first, second)."""
    w = api.worker(q, {"t": api.handler(sleep=sleep, start=lambda job: ran.append(job.id))},
                   concurrency=1, prefetch=1, shutdown_timeout=5)
    first = await q.enqueue("t")
    await wait_until(lambda: ran == [first.id], timeout=10, what="the first job to start")
    second = await q.enqueue("t")
    await wait_until(lambda: _state_in(q, second.id, ("active",)), timeout=5, what="the prefetch")
    return w, first, second


@pytest.mark.parametrize("told", ["at the stop", "by a heartbeat"])
async def test_a_claimed_job_cancelled_before_it_started_says_it_never_ran(api, told):
    """A prefetched job (claimed, no slot started it) is cancelled. Settled by the shutdown's
    release (its attempt refunded: attempts 0) or by the fail its worker sends once a heartbeat
    tells it, it ended cancelled with the error 'cancelled while running': it never ran."""
    lease = 6 if told == "at the stop" else 0.9  # heartbeats every 2 s, or every 0.3 s
    q = api.queue(store_results=True, max_attempts=3, lease=lease, maintenance_interval=0.1)
    ran: list[str] = []
    w, first, second = await _one_running_one_prefetched(api, q, ran, sleep=1.5)
    assert await q.cancel(second.id) is True
    if told == "at the stop":
        w.stop()  # before the next heartbeat: the release finds the cancel
    with pytest.raises(JobCancelledError, match="before it ran") as cancelled:
        await _result(api, q, second.id, timeout=5)
    assert cancelled.value.attempts == 0
    w.stop()
    await w.join(10)
    assert ran == [first.id]
    stored = await q.get_job(second.id)
    assert (stored.state, stored.attempts) == ("cancelled", 0), stored


async def test_a_time_limit_passing_during_a_shutdown_release_logs_no_maintenance_failure(
    redis_url, queue_name, caplog, monkeypatch
):
    """At the shutdown deadline an AsyncWorker keeps a sync task whose thread still runs as running
    in its dispatcher but drops it from its slots' table. Its time limit passing before run()
    ended (here, while the release of another job was in flight) raised KeyError in the stop,
    logged as 'maintenance failed'."""
    import threading  # noqa: PLC0415

    from conveyor import AsyncWorker, Conveyor  # noqa: PLC0415
    from conveyor._scripts import Scripts  # noqa: PLC0415
    from test_shutdown_defects import _wrap_run  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name, lease=30, maintenance_interval=0.1)
    gate, started = threading.Event(), threading.Event()

    @app.task(time_limit=0.8)
    def stuck() -> None:
        started.set()
        gate.wait(10)

    @app.task
    async def waits() -> None:
        await asyncio.sleep(30)

    async def after(call, reply):
        if call.script is Scripts.RELEASE.value:
            await asyncio.sleep(1.5)  # the time limit passes meanwhile

    class Api:  # what _wrap_run needs of the api fixture
        is_async = True

    _wrap_run(monkeypatch, Api, after)
    await stuck.aenqueue()
    await waits.aenqueue()
    q = app.async_queue(queue_name)
    worker = AsyncWorker(q, app.async_handlers(queue_name), concurrency=2, shutdown_timeout=0.2,
                         install_signal_handlers=False)
    task = asyncio.create_task(worker.run())
    try:
        assert await asyncio.to_thread(started.wait, 10)
        await wait_until(lambda: worker._dispatch.running and len(worker._dispatch.running) == 2,
                         timeout=5, what="both handlers to start")
        worker.stop()
        await asyncio.wait_for(task, 10)
    finally:
        gate.set()
        await app.aclose()
    failed = [r.getMessage() for r in caplog.records if "maintenance failed" in r.getMessage()]
    assert failed == []


async def test_a_waiter_on_a_job_finished_without_a_record_returns_promptly_on_a_busy_queue(api):
    """A job finished by a client whose store_results is off writes no record and no event; the
    reader re-read every waited job only after a second without events, so while other jobs kept
    finishing (events all the time) its waiters waited out their whole timeout."""
    from conveyor import ConveyorError  # noqa: PLC0415

    q = api.queue(store_results=True)
    off = api.queue(store_results=False)
    job = await q.enqueue("target")
    [held] = await off.claim()
    waiter = asyncio.ensure_future(_result(api, q, job.id, timeout=6))
    await asyncio.sleep(0.2)  # the waiter probed: active, it waits on the events

    async def busy() -> None:  # another job finishes every 0.1 s, announced on the stream
        while True:
            await q.enqueue("other")
            [other] = await q.claim()
            await q.ack(other, result=1)
            await asyncio.sleep(0.1)

    load = asyncio.ensure_future(busy())
    try:
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        await off.ack(held)  # completed, no record, nothing announced
        with pytest.raises(ConveyorError, match="no stored result"):
            await waiter
        assert time.monotonic() - t0 < 3
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)


async def test_a_sync_task_stopped_as_its_thread_takes_the_call_never_runs_beside_its_retry(
    redis_url, queue_name, monkeypatch
):
    """The executor's thread took a sync task's call, but had not yet recorded that it runs it
    when the attempt's time limit stopped it: the worker took the call for never run and retried
    it, and the thread then ran the task beside the retry (the job ran twice at once)."""
    from conveyor import AsyncWorker, Backoff, Conveyor, _hooks, current_job  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name, lease=30, maintenance_interval=0.1,
                   max_attempts=2, backoff=Backoff(base=0.01, jitter=0), keep_completed=10, keep_failed=10)
    runs: list[int] = []

    @app.task(time_limit=0.3)
    def work() -> str:
        runs.append(current_job().attempts)
        return "done"

    real = _hooks._in_a_thread

    def taken_then_descheduled(job, fn, args, kwargs):  # the thread took the call, then paused
        if job.attempts == 1:
            deadline = time.monotonic() + 5
            while job.stop_reason is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)  # the worker settles the stopped attempt meanwhile
        return real(job, fn, args, kwargs)

    monkeypatch.setattr(_hooks, "_in_a_thread", taken_then_descheduled)

    job = await work.aenqueue()
    q = app.async_queue(queue_name)
    worker = AsyncWorker(q, app.async_handlers(queue_name), concurrency=2, install_signal_handlers=False)
    task = asyncio.create_task(worker.run())
    try:
        await wait_until(lambda: _state_in(q, job.id, ("completed", "failed")), timeout=10, what="the end")
        await asyncio.sleep(1.0)  # the first thread has woken by now
        stored = await q.get_job(job.id)
        # Either the stop took the call for running (failed, not retried) or for never run (retried,
        # and the first thread then does not run it): never both runs.
        assert runs == ([2] if stored.state == "completed" else [1]), (runs, stored)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await app.aclose()
