"""Edges of a worker: time limits of prefetched jobs, hooks around a stop, the shutdown's last
attempts, reads of a queue that does not exist, and how maintenance errors are logged."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from _support import api_fixture, counts, wait_until  # noqa: F401 - api_fixture provides `api`
from conveyor import AsyncQueue, Backoff, Job, Queue

FAST = {"lease": 0.9, "backoff": Backoff(base=0.01, jitter=0), "maintenance_interval": 0.1}


async def test_a_prefetched_job_whose_limit_passes_before_it_started_goes_back_uncounted(api):
    """A job claimed into the prefetch buffer behind a long one reached its time limit before any
    slot started it: it counted an attempt and, on its last one, ended failed 'timed out' without
    having run. It is now given back (its attempt refunded) and claimed again once a slot is free."""
    q = api.queue(max_attempts=1, **FAST)
    ran: list[str] = []
    attempts: list[int] = []

    def started(job: Job) -> None:
        ran.append(job.id)
        attempts.append(job.attempts)

    handlers = {"long": api.handler(sleep=2.0, start=started), "short": api.handler(start=started)}
    w = api.worker(q, handlers, concurrency=1, prefetch=1)
    first = await q.enqueue("long")
    await wait_until(lambda: ran == [first.id], timeout=10, what="the first job to start")
    second = await q.enqueue("short", time_limit=0.4)
    await asyncio.sleep(1.0)  # its limit passed while it waited in the buffer
    stored = await q.get_job(second.id)
    assert (stored.state, stored.attempts) == ("waiting", 0), stored  # not claimed again meanwhile
    await wait_until(lambda: ran == [first.id, second.id], timeout=10, what="the second job to run")
    await wait_until(lambda: _counts_are(q, counts(total_completed=2)), timeout=5, what="both completions")
    assert attempts == [1, 1]
    w.stop()
    await w.join(10)


async def test_a_buffered_job_past_its_limit_is_given_back_when_a_slot_frees_before_the_tick(api):
    """As above, but the slot came free after the buffered job's limit passed and before the next
    maintenance tick saw it: the slot started it past its limit, and then the sync worker's next
    tick failed it for good ('not retried', its handler still running), while the asyncio twin
    cancelled it at once (an attempt spent). It is given back uncounted and runs once, in full.
    (A 0.5 s tick lands in the 0.1 s between the limit and the free slot now and then: the sync
    twin then takes the path of the test above, which passed before too.)"""
    q = api.queue(max_attempts=2, lease=3.0, maintenance_interval=0.5, backoff=Backoff(base=0.01, jitter=0))
    ran: list[tuple[str, int]] = []

    def started(job: Job) -> None:
        ran.append((job.task, job.attempts))

    handlers = {"long": api.handler(sleep=1.3, start=started), "short": api.handler(sleep=0.6, start=started)}
    w = api.worker(q, handlers, concurrency=1, prefetch=1)
    await q.enqueue("long")
    await wait_until(lambda: ran == [("long", 1)], timeout=10, what="the long job to start")
    await q.enqueue("short", time_limit=1.2)  # claimed into the buffer at once
    await wait_until(lambda: _counts_are(q, counts(total_completed=2)), timeout=10, what="both completions")
    assert ran == [("long", 1), ("short", 1)]
    w.stop()
    await w.join(10)


async def _counts_are(q, expected: dict[str, int]) -> bool:
    return await q.counts() == expected


async def test_listing_the_waiting_jobs_of_a_queue_that_does_not_exist_writes_nothing(api):
    """jobs('waiting') is a script call, whose first call ran the startup check (HSETNX meta v):
    a read created the queue's meta hash, where counts(), get_job() and jobs() of other states
    write nothing."""
    q = api.queue()
    before = api.all_keys()
    assert await q.jobs("waiting") == []
    assert await q.jobs("waiting") == []
    assert api.all_keys() <= before
    assert api.queue_keys() == []
    job = await q.enqueue("t")  # the queue still works, and its layout version is written
    assert [j.id for j in await q.jobs("waiting")] == [job.id]
    assert api.admin.hget(q.keys.meta, "v") is not None


async def test_an_unexpected_maintenance_error_is_logged_with_its_traceback_once(api, caplog, monkeypatch):
    """The sync worker logged an unexpected maintenance error without its traceback, the asyncio
    one with it at every retry: both now give it once, then the warning alone."""
    cls = AsyncQueue if api.is_async else Queue

    def broken(self, *args, **kwargs):
        raise RuntimeError("a bug in maintenance")

    monkeypatch.setattr(cls, "promote", broken)
    q = api.queue(**FAST)
    with caplog.at_level(logging.WARNING, logger="conveyor.worker"):
        w = api.worker(q, {"t": api.handler()})

        def failures() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "maintenance failed" in r.getMessage()]

        await wait_until(lambda: len(failures()) >= 3, timeout=5, what="three maintenance failures")
        w.stop()
        await w.join(10)
    records = failures()
    assert "a bug in maintenance" in records[0].getMessage()
    assert records[0].exc_info is not None
    assert [r.exc_info for r in records[1:]] == [None] * (len(records) - 1)


@pytest.mark.parametrize("kind", ["async task", "sync task on asyncio", "sync worker"])
async def test_a_task_that_returned_is_acknowledged_when_its_limit_passes_in_an_after_hook(
    redis_url, queue_name, kind
):
    """The task returned, then its time limit passed while an ``after`` hook still ran: the attempt
    was settled as timed out (retried: the completed task ran again; or, a thread, failed for
    good). Its outcome was success: it is acknowledged, with its result."""
    from conveyor import AsyncWorker, Conveyor, Worker  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name, lease=0.9, maintenance_interval=0.1,
                   max_attempts=3, store_results=True)
    runs: list[int] = []

    if kind == "async task":

        @app.task(time_limit=0.3)
        async def work() -> str:
            runs.append(1)
            return "done"
    else:

        @app.task(time_limit=0.3)
        def work() -> str:
            runs.append(1)
            return "done"

    if kind == "sync worker":

        @app.after
        def slow_after(job, result) -> None:
            time.sleep(0.6)  # (a thread cannot be cut: well within the lease)
    else:

        @app.after
        async def slow_after(job, result) -> None:
            await asyncio.sleep(1.0)

    worker: Worker | AsyncWorker
    if kind == "sync worker":
        q = app.queue(queue_name)
        worker = Worker(q, app.handlers(queue_name), install_signal_handlers=False, block_timeout=0.2)
        runner = asyncio.ensure_future(asyncio.to_thread(worker.run))
    else:
        aq = app.async_queue(queue_name)
        worker = AsyncWorker(aq, app.async_handlers(queue_name), install_signal_handlers=False)
        runner = asyncio.ensure_future(worker.run())
    try:
        if kind == "sync worker":
            job = await asyncio.to_thread(work.enqueue)
            result = await asyncio.to_thread(q.result, job.id, 5)
            await asyncio.sleep(1.5)  # a retry would have run by now
            totals = await asyncio.to_thread(q.counts)
        else:
            job = await work.aenqueue()
            result = await aq.result(job.id, 5)
            await asyncio.sleep(1.5)
            totals = await aq.counts()
    finally:
        worker.stop()
        await asyncio.wait_for(runner, 10)
        await app.aclose()
    assert result == "done"
    assert runs == [1]
    assert (totals["total_completed"], totals["total_failed"], totals["delayed"]) == (1, 0, 0)


async def test_a_job_failed_at_the_shutdown_deadline_runs_no_failure_hook_as_documented(
    redis_url, queue_name
):
    """A job given back at an AsyncWorker's shutdown deadline on its last attempt ends failed
    (release.lua), settled by the server after the hooks ran: no on_failure hook, not counted in
    conveyor_jobs_failed_total, a ``conveyor.released`` span event. production.md's Hooks and
    Metrics now say which failures the hooks see; this pins both sides."""
    from pathlib import Path  # noqa: PLC0415

    from conveyor import AsyncWorker, Conveyor  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name, lease=30, maintenance_interval=0.1, max_attempts=1)
    seen: list[str] = []
    app.on_failure(lambda job, exc: seen.append("on_failure"))
    app.hooks.add(app.hooks.on_release, lambda job: seen.append("released"))

    @app.task
    async def long() -> None:
        seen.append("start")
        await asyncio.sleep(30)

    aq = app.async_queue(queue_name)
    job = await long.aenqueue()
    worker = AsyncWorker(aq, app.async_handlers(queue_name), shutdown_timeout=0.2,
                         install_signal_handlers=False)
    runner = asyncio.ensure_future(worker.run())
    try:
        await wait_until(lambda: seen == ["start"], timeout=10, what="the task to start")
        worker.stop()
        await asyncio.wait_for(runner, 10)
        stored = await aq.get_job(job.id)
    finally:
        await app.aclose()
    assert (stored.state, seen) == ("failed", ["start", "released"]), stored
    page = (Path(__file__).parents[2] / "docs" / "production.md").read_text()
    hooks = page[page.index("## Hooks"):page.index("## Metrics")]
    assert "given back at the shutdown deadline on\nits last attempt" in hooks
    assert "failed by lease recovery" in hooks
    assert "not jobs failed at a shutdown deadline or by lease recovery" in page


KINDS = ["async task", "sync task on asyncio", "sync worker"]


def _app_with_work(redis_url: str, queue_name: str, kind: str, value: object):
    """An app (results stored, 3 attempts) whose task ``work`` records its run and returns ``value``:
    async for "async task", sync otherwise. Returns (app, runs)."""
    from conveyor import Conveyor  # noqa: PLC0415

    app = Conveyor(redis_url, default_queue=queue_name, lease=0.9, maintenance_interval=0.1,
                   max_attempts=3, store_results=True)
    runs: list[int] = []

    def body() -> object:
        runs.append(1)
        return value

    if kind == "async task":

        @app.task
        async def work() -> object:
            return body()
    else:
        app.task(body, name="work")
    return app, runs


def _slow_after_app(
    redis_url: str, queue_name: str, kind: str, hook_seconds: float, value: object = "done",
    hook: str = "after", **worker_options,
):
    """An app whose task ``work`` records its run and returns ``value``, then a ``hook`` (``after``
    or ``on_failure``) that takes ``hook_seconds`` (a sync hook in a sync Worker, async otherwise)
    and records its start; and the worker to run it. Returns (app, runs, hooked, worker, queue)."""
    from conveyor import AsyncWorker, Worker  # noqa: PLC0415

    app, runs = _app_with_work(redis_url, queue_name, kind, value)
    hooked: list[int] = []

    def slow(job, outcome) -> None:
        hooked.append(1)
        time.sleep(hook_seconds)

    async def aslow(job, outcome) -> None:
        hooked.append(1)
        await asyncio.sleep(hook_seconds)

    getattr(app, hook)(slow if kind == "sync worker" else aslow)

    worker: Worker | AsyncWorker
    if kind == "sync worker":
        q: Queue | AsyncQueue = app.queue(queue_name)
        worker = Worker(q, app.handlers(queue_name), install_signal_handlers=False, block_timeout=0.2,
                        **worker_options)
    else:
        q = app.async_queue(queue_name)
        worker = AsyncWorker(q, app.async_handlers(queue_name), install_signal_handlers=False,
                             **worker_options)
    return app, runs, hooked, worker, q


async def _call(q, method: str, *args):
    """Call a method of a sync or async queue."""
    if isinstance(q, Queue):
        return await asyncio.to_thread(getattr(q, method), *args)
    return await getattr(q, method)(*args)


def _start(worker) -> asyncio.Future:
    from conveyor import Worker  # noqa: PLC0415

    run = asyncio.to_thread(worker.run) if isinstance(worker, Worker) else worker.run()
    return asyncio.ensure_future(run)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_task_that_returned_is_acknowledged_when_the_shutdown_deadline_passes_in_an_after_hook(
    redis_url, queue_name, kind
):
    """The task returned, then the worker's shutdown deadline passed while an ``after`` hook still
    ran: an AsyncWorker gave the job back as started (the completed task ran again on another
    worker, or ended failed on its last attempt); a sync Worker left its lease to expire, to be
    run again. Its outcome was success: it is acknowledged at the deadline, with its result."""
    app, runs, hooked, worker, q = _slow_after_app(redis_url, queue_name, kind, 2.0, shutdown_timeout=0.2)
    runner = _start(worker)
    try:
        job = await _call(q, "enqueue", "work")
        await wait_until(lambda: hooked == [1], timeout=10, what="the after hook to start")
        worker.stop()
        await asyncio.wait_for(runner, 10)
        stored = await _call(q, "get_job", job.id)  # None once completed (not retained)
        assert (stored, runs) == (None, [1]), stored  # not given back, nor left to expire
        result = await _call(q, "result", job.id, 0)
        totals = await _call(q, "counts")
    finally:
        await app.aclose()
    assert (result, totals["total_completed"]) == ("done", 1)



@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancel_that_arrives_in_the_after_hooks_of_a_task_that_returned_leaves_it_completed(
    redis_url, queue_name, kind
):
    """The task returned, then a cancel() reached its worker while an ``after`` hook still ran: the
    job ended cancelled, its result lost. production.md: a job that completes before its worker
    learns of the cancel ends completed; a task that returned has completed."""
    app, runs, hooked, worker, q = _slow_after_app(redis_url, queue_name, kind, 1.0)
    runner = _start(worker)
    try:
        job = await _call(q, "enqueue", "work")
        await wait_until(lambda: hooked == [1], timeout=10, what="the after hook to start")
        assert await _call(q, "cancel", job.id)
        result = await _call(q, "result", job.id, 5)
        totals = await _call(q, "counts")
    finally:
        worker.stop()
        await asyncio.wait_for(runner, 10)
        await app.aclose()
    assert (result, runs, totals["total_completed"]) == ("done", [1], 1)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_failure_decided_before_the_shutdown_deadline_stands_when_it_passes_in_a_failure_hook(
    redis_url, queue_name, kind
):
    """The task's return value could not be stored (a failure without retry), then an AsyncWorker's
    shutdown deadline passed while an ``on_failure`` hook still ran: the hook re-raised the
    deadline's CancelledError and the job was given back as started, so it ran again (twice more
    with max_attempts 3); a sync Worker left its lease to expire, to run it again. The decided
    failure stands: the job is failed, with its error."""
    app, runs, hooked, worker, q = _slow_after_app(  # (not serialisable: failed, no retry)
        redis_url, queue_name, kind, 2.0, object(), "on_failure", shutdown_timeout=0.2
    )
    runner = _start(worker)
    try:
        job = await _call(q, "enqueue", "work")
        await wait_until(lambda: hooked == [1], timeout=10, what="the on_failure hook to start")
        worker.stop()
        await asyncio.wait_for(runner, 10)
        stored = await _call(q, "get_job", job.id)
    finally:
        await app.aclose()
    assert (stored.state, stored.attempts, runs) == ("failed", 1, [1]), stored
    assert "SerializationError" in (stored.error or ""), stored.error
