"""The application object: typed tasks, defaults, hooks and several queues served in one process."""

from __future__ import annotations

import asyncio
import threading

import pytest
from conveyor import Backoff, Conveyor, Job, Task, UnknownTaskError, Worker
from conveyor._runner import Runner


def _app(redis_url: str, queue_name: str, **settings) -> Conveyor:
    return Conveyor(redis_url, default_queue=queue_name, maintenance_interval=0.1,
                    backoff=Backoff(base=0.02, cap=0.05), keep_failed=-1, keep_completed=-1, **settings)


def _run(app: Conveyor, queues: list[str], **options) -> dict[str, dict[str, int]]:
    return Runner(app, queues, **{"burst": True, "concurrency": 4, **options}).run()


def _outcome_hooks(app: Conveyor, runs_on: str) -> list[str]:
    """Record every outcome hook as 'kind:ExceptionOrResultType'; put the app's queue on asyncio
    (one async task) unless ``runs_on`` is 'thread-worker'."""
    events: list[str] = []
    for kind in ("after", "on_retry", "on_failure"):
        getattr(app, kind)(lambda job, out, kind=kind: events.append(f"{kind}:{type(out).__name__}"))
    if runs_on != "thread-worker":
        @app.task
        async def unused() -> None:  # one async task puts the queue on asyncio
            pass
    return events


def test_sync_tasks_run_with_their_arguments_and_defaults(redis_url, queue_name):
    app = _app(redis_url, queue_name)
    got: list[tuple[str, str]] = []

    @app.task
    def greet(name: str, punctuation: str = "!") -> str:
        got.append((name, punctuation))
        return name + punctuation

    @app.task(queue=queue_name + "-low", max_attempts=5, name="later")
    def slow_greet(name: str) -> None:
        got.append(("low", name))

    assert isinstance(greet, Task) and greet("direct") == "direct!"  # a call runs in place
    job = greet.enqueue("ada", punctuation="?")
    assert job.task == "greet" and job.max_attempts == 3 and job.state == "waiting"
    assert slow_greet.enqueue("bob").max_attempts == 5
    delayed = slow_greet.with_options(delay=30, job_id="later-1").enqueue("eve")
    assert delayed.state == "delayed" and delayed.id == "later-1"
    assert app.queue_names() == sorted([queue_name, queue_name + "-low"])

    stats = _run(app, [queue_name, queue_name + "-low"])
    assert sorted(got) == sorted([("direct", "!"), ("ada", "?"), ("low", "bob")])
    assert stats[queue_name]["processed"] == 1 and stats[queue_name + "-low"]["processed"] == 1
    app.close()


def test_bad_calls_are_refused_before_anything_is_sent(redis_url, queue_name):
    app = _app(redis_url, queue_name)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(TypeError, match=r"task 'add'.*missing a required argument: 'b'"):
        add.enqueue(1)  # type: ignore[call-arg]
    with pytest.raises(UnknownTaskError, match="unknown task 'nope' \\(registered: add\\)"):
        app.enqueue("nope", 1)
    with pytest.raises(ValueError, match="task 'add' is already registered"):
        app.task(name="add")(lambda: None)
    with pytest.raises(ValueError, match="max_attempts must be an int >= 1, got 0"):
        app.task(max_attempts=0)
    with pytest.raises(ValueError, match="time_limit must be a number of seconds > 0, got 0"):
        app.task(time_limit=0)
    with pytest.raises(ValueError, match="time_limit must be a number of seconds > 0, got -1"):
        add.with_options(time_limit=-1).enqueue(1, 2)
    with pytest.raises(ValueError, match="queue 'other' has no registered task"):
        Runner(app, [queue_name, "other"])
    assert app.queue(queue_name).counts()["waiting"] == 0
    app.close()


def test_a_payload_that_is_not_task_arguments_fails_for_good(redis_url, queue_name):
    app = _app(redis_url, queue_name)

    @app.task
    def noop() -> None:
        pass

    raw = app.queue(queue_name).enqueue("noop", [1, 2])  # bypasses the task's argument packing
    assert _run(app, [queue_name])[queue_name]["failed"] == 1
    job = app.queue(queue_name).get_job(raw.id)
    assert job is not None and job.state == "failed" and job.attempts == 1
    assert "is not task arguments" in (job.error or "")
    app.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hooks_run_in_order_around_every_call(redis_url, queue_name, mode):
    app = _app(redis_url, queue_name, max_attempts=2)
    events: list[str] = []
    lock = threading.Lock()

    def record(event: str) -> None:
        with lock:
            events.append(event)

    def make(kind: str, tag: str):
        if mode == "async":
            async def ahook(job: Job, *rest) -> None:
                record(f"{kind}{tag}:{job.payload['args'][0]}:{job.attempts}")
            return ahook

        def hook(job: Job, *rest) -> None:
            record(f"{kind}{tag}:{job.payload['args'][0]}:{job.attempts}")
        return hook

    for tag in ("1", "2"):
        for kind in ("before", "after", "on_retry", "on_failure"):
            getattr(app, kind)(make(kind, tag))

    @app.task
    def work(word: str) -> str:
        record(f"task:{word}")
        if word == "boom":
            raise RuntimeError("boom")
        return word

    @app.after
    def broken_after(job: Job, result: object) -> None:
        raise RuntimeError("an after hook that fails is logged, not fatal")

    work.enqueue("ok")
    stats = _run(app, [queue_name], concurrency=1)
    work.enqueue("boom")
    while app.queue(queue_name).counts()["failed"] == 0:
        stats = _run(app, [queue_name], concurrency=1)
    assert stats[queue_name]["processed"] + stats[queue_name]["failed"] >= 1
    assert events == [
        "before1:ok:1", "before2:ok:1", "task:ok", "after2:ok:1", "after1:ok:1",
        "before1:boom:1", "before2:boom:1", "task:boom", "on_retry2:boom:1", "on_retry1:boom:1",
        "before1:boom:2", "before2:boom:2", "task:boom", "on_failure2:boom:2", "on_failure1:boom:2",
    ]


def test_a_failing_before_hook_fails_the_attempt(redis_url, queue_name):
    app = _app(redis_url, queue_name, max_attempts=1)
    ran: list[str] = []

    @app.before
    def veto(job: Job) -> None:
        raise PermissionError("vetoed by a hook")

    @app.on_failure
    def failed(job: Job, exc: BaseException) -> None:
        ran.append(f"on_failure: {exc}")

    @app.task
    def work() -> None:
        ran.append("task")

    job = work.enqueue()
    assert _run(app, [queue_name])[queue_name]["failed"] == 1
    stored = app.queue(queue_name).get_job(job.id)
    assert ran == ["on_failure: vetoed by a hook"]  # the task never ran; failure hooks did
    assert stored is not None and "vetoed by a hook" in (stored.error or "")


def test_async_and_sync_tasks_share_an_asyncio_worker(redis_url, queue_name):
    app = _app(redis_url, queue_name, max_attempts=1)
    got: list[str] = []

    @app.task
    async def fetch(url: str) -> None:
        await asyncio.sleep(0)
        got.append("async:" + url)

    @app.task
    def parse(text: str) -> None:
        got.append(f"thread:{text}:{threading.current_thread() is not threading.main_thread()}")

    @app.task(time_limit=0.2)
    async def hang() -> None:
        await asyncio.sleep(30)

    async def enqueue() -> list[Job]:
        jobs = [await fetch.aenqueue("a"), await parse.aenqueue("b"), await hang.aenqueue()]
        await app.aclose()
        return jobs

    jobs = asyncio.run(enqueue())
    runner = Runner(app, [queue_name], burst=True, concurrency=4)
    assert runner.use_asyncio
    stats = runner.run()
    assert sorted(got) == ["async:a", "thread:b:True"]
    assert stats[queue_name] == {"processed": 2, "failed": 1, "held": 0}
    timed_out = app.queue(queue_name).get_job(jobs[2].id)
    assert timed_out is not None and "exceeded its time limit of 0.2 s" in (timed_out.error or "")
    with pytest.raises(TypeError, match="task 'fetch' is async"):
        app.handlers(queue_name)
    app.close()


def test_sync_tasks_in_an_asyncio_worker_get_a_thread_per_slot(redis_url, queue_name):
    app = _app(redis_url, queue_name, max_attempts=1)
    slots = 12  # more than the stock executor's min(32, CPUs + 4) threads on a small machine
    together = threading.Barrier(slots)

    @app.task
    async def unused() -> None:  # one async task puts the queue on asyncio
        pass

    @app.task
    def meet(i: int) -> None:
        together.wait(timeout=30)  # only returns once all jobs run at the same time

    app.queue(queue_name).enqueue_many([meet.spec(i) for i in range(slots)])
    stats = _run(app, [queue_name], concurrency=slots)
    assert stats[queue_name] == {"processed": slots, "failed": 0, "held": 0}
    app.close()


def test_a_handler_built_before_any_hook_runs_the_hooks_added_later(redis_url, queue_name):
    """Without hooks a handler is the bare task call, decided at each call: it was decided when the
    handler was built, so hooks added after a worker was built (instrument() among them) never ran
    for that worker."""
    app = _app(redis_url, queue_name)

    @app.task
    def work() -> None:
        pass

    handlers = app.handlers(queue_name)  # no hook yet
    seen: list[str] = []
    app.before(lambda job: seen.append(job.task))
    work.enqueue()
    assert Worker(app.queue(queue_name), handlers, burst=True).run()["processed"] == 1
    assert seen == ["work"]
    app.close()


@pytest.mark.parametrize("kind", ["before", "after", "on_retry", "on_failure"])
def test_an_async_hook_added_once_a_thread_worker_was_built_is_refused(redis_url, queue_name, kind):
    """A thread Worker's handlers call hooks without awaiting them: an async hook registered after
    they were built would have been called and never awaited (skipped, a RuntimeWarning at most),
    where registering it before makes handlers() refuse. It is refused when added, and nothing is
    registered; sync hooks are still taken."""
    app = _app(redis_url, queue_name)

    @app.task
    def work() -> None:
        pass

    handlers = app.handlers(queue_name)

    async def late(*_: object) -> None:
        pass

    with pytest.raises(TypeError, match=r"async hook .*late.* thread Worker"):
        getattr(app, kind)(late)
    assert not app.hooks.any_async()
    seen: list[str] = []
    app.before(lambda job: seen.append(job.task))
    work.enqueue()
    assert Worker(app.queue(queue_name), handlers, burst=True).run()["processed"] == 1
    assert seen == ["work"]
    app.close()


def test_an_async_hook_is_taken_when_only_asyncio_handlers_were_built(redis_url, queue_name):
    app = _app(redis_url, queue_name)

    @app.task
    def work() -> None:
        pass

    app.async_handlers(queue_name)

    async def late(job: Job) -> None:
        pass

    assert app.before(late) is late and app.hooks.any_async()
    app.close()


def test_a_task_enqueued_through_the_app_returns_its_result(redis_url, queue_name):
    app = _app(redis_url, queue_name, store_results=True)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    job = add.enqueue(2, 3)
    _run(app, [queue_name])
    assert job.result(timeout=5) == 5
    app.close()


@pytest.mark.parametrize("runs_on", ["asyncio", "thread-worker", "asyncio-thread"])
def test_an_attempt_stopped_at_its_time_limit_runs_the_failure_hooks(redis_url, queue_name, runs_on):
    """Before, a timed-out attempt skipped every failure hook (tracing left its span open and
    metrics their start time, per attempt), and a sync task that returned after its limit ran the
    ``after`` hooks: metrics counted it completed although the job was failed."""
    app = _app(redis_url, queue_name, max_attempts=2)
    events = _outcome_hooks(app, runs_on)
    if runs_on == "asyncio":
        @app.task(time_limit=0.2)
        async def slow() -> None:
            await asyncio.sleep(10)
    else:
        @app.task(time_limit=0.2)
        def slow() -> None:  # ignores current_job().cancelled, returns after its limit
            threading.Event().wait(0.6)

    slow.enqueue()
    while app.queue(queue_name).counts()["failed"] == 0:  # a retry waits out its backoff
        _run(app, [queue_name], concurrency=1)
    expected = {  # a thread still running is not retried: on_failure at once
        "asyncio": ["on_retry:TimeoutError", "on_failure:TimeoutError"],
        "thread-worker": ["on_failure:TimeoutError"],
        "asyncio-thread": ["on_failure:TimeoutError"],
    }[runs_on]
    for _ in range(50):  # a thread worker reports when the abandoned thread returns
        if len(events) >= len(expected):
            break
        threading.Event().wait(0.05)
    threading.Event().wait(0.7)  # nothing more comes (the thread's late return adds nothing)
    assert events == expected
    assert app.queue(queue_name).counts()["failed"] == 1
    app.close()


def test_a_job_cancelled_while_running_runs_the_failure_hooks(redis_url, queue_name):
    app = _app(redis_url, queue_name, lease=0.6)  # a heartbeat (lease / 3) brings the cancel
    events: list[str] = []
    for kind in ("after", "on_retry", "on_failure"):
        getattr(app, kind)(lambda job, out, kind=kind: events.append(f"{kind}:{type(out).__name__}"))
    started = threading.Event()

    @app.task
    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)

    job = slow.enqueue()
    canceller = threading.Thread(target=lambda: started.wait(10) and app.queue(queue_name).cancel(job.id))
    canceller.start()
    _run(app, [queue_name], concurrency=1)
    canceller.join(10)
    assert events == ["on_failure:CancelledError"]
    assert app.queue(queue_name).counts()["cancelled"] == 1
    app.close()


def test_a_sync_task_past_its_limit_does_not_starve_the_next_jobs_of_a_thread(redis_url, queue_name):
    """An asyncio worker frees the slot of a sync task past its time limit while its thread runs
    on: the next jobs must still get a thread of their own. Before, the executor had one thread
    per slot, so they queued behind the overrunning thread until their own limit passed, and were
    failed for good as 'its handler was still running' without ever running."""
    app = _app(redis_url, queue_name, max_attempts=2)
    release, ran = threading.Event(), []

    @app.task
    async def unused() -> None:  # one async task puts the queue on asyncio
        pass

    @app.task(time_limit=0.3)
    def stuck() -> None:  # ignores current_job().cancelled
        release.wait(10)

    @app.task(time_limit=0.3)
    def quick(n: int) -> None:
        ran.append(n)

    app.queue(queue_name).enqueue_many([stuck.spec()] + [quick.spec(i) for i in range(3)])
    try:
        stats = _run(app, [queue_name], concurrency=1)
    finally:
        release.set()
    assert sorted(ran) == [0, 1, 2]
    assert stats[queue_name] == {"processed": 3, "failed": 1, "held": 0}
    [failed] = app.queue(queue_name).jobs("failed")
    assert failed.task == "stuck" and "its handler was still running" in (failed.error or "")
    app.close()


def test_a_sync_task_that_timed_out_before_its_thread_started_is_retried(redis_url, queue_name):
    """Where the executor is the caller's (an AsyncWorker given an app's handlers on the stock
    pool), a sync task's attempt can time out while it waits for a thread: nothing ran, so it is
    retried, not failed as 'its handler was still running'."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from conveyor import AsyncWorker  # noqa: PLC0415

    app = _app(redis_url, queue_name, max_attempts=5)
    release, ran = threading.Event(), []

    @app.task(time_limit=0.3)
    def stuck() -> None:
        release.wait(10)

    @app.task(time_limit=0.3)
    def quick(n: int) -> None:
        ran.append(n)

    app.queue(queue_name).enqueue_many([stuck.spec(), quick.spec(1)])

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        q = app.async_queue(queue_name)
        worker = AsyncWorker(q, app.async_handlers(queue_name), concurrency=2)
        task = asyncio.create_task(worker.run())
        for _ in range(100):  # quick's first attempt times out in the executor's queue
            job = await q.get_job("2")
            if job is not None and job.attempts >= 1 and job.state != "active":
                break
            await asyncio.sleep(0.05)
        release.set()
        for _ in range(100):  # its retry runs once the thread is free
            job = await q.get_job("2")
            if job is not None and job.state in ("completed", "failed"):
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await task
        await app.aclose()

    asyncio.run(main())
    quick_job = app.queue(queue_name).get_job("2")
    assert quick_job is not None and quick_job.state == "completed", quick_job
    assert ran == [1]
    app.close()


def test_a_task_cannot_be_sent_to_a_queue_its_workers_do_not_serve(redis_url, queue_name):
    """Workers serve a task on the queue it was registered with: with_options(queue=other) was
    taken and its job waited for ever (the CLI refused '-q other': no registered task)."""
    app = _app(redis_url, queue_name)

    @app.task
    def work(n: int) -> None:
        pass

    refusal = r"task 'work' is registered on queue .*with_options\(queue='urgent'\)"
    with pytest.raises(ValueError, match=refusal):
        work.with_options(queue="urgent").enqueue(1)
    assert work.with_options(queue=queue_name).enqueue(1).state == "waiting"  # its own queue: fine
    assert app.queue("urgent").counts()["waiting"] == 0
    app.close()


def test_an_asyncio_worker_that_ends_leaves_no_time_limit_timer_behind(redis_url, queue_name):
    """A sync task's thread still running when an asyncio worker ends at its shutdown deadline:
    its time-limit timer must go with the worker. Before, it fired later on the caller's loop and
    raised KeyError there (the job was no longer the worker's), reported by the loop as an error."""
    from conveyor import AsyncWorker  # noqa: PLC0415

    app = _app(redis_url, queue_name)
    release, started = threading.Event(), threading.Event()

    @app.task(time_limit=0.6)
    def stuck() -> None:
        started.set()
        release.wait(10)

    app.queue(queue_name).enqueue_many([stuck.spec()])
    errors: list[dict] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
        q = app.async_queue(queue_name)
        worker = AsyncWorker(q, app.async_handlers(queue_name), concurrency=1, shutdown_timeout=0.05)
        task = asyncio.create_task(worker.run())
        assert await asyncio.to_thread(started.wait, 10)
        worker.stop()
        await task
        await asyncio.sleep(1.0)  # past the time limit: the timer would have fired by now
        await app.aclose()

    try:
        asyncio.run(main())
    finally:
        release.set()
    assert errors == []
    app.close()


def test_a_cancelled_error_raised_by_the_task_itself_runs_the_failure_hooks(redis_url, queue_name):
    """An async task that raises CancelledError itself (not stopped by the worker) fails its
    attempt like any other error; its failure hooks must run (before, none did: the hooks took it
    for the worker ending, and metrics missed the failure)."""
    app = _app(redis_url, queue_name, max_attempts=2)
    events: list[str] = []
    for kind in ("after", "on_retry", "on_failure"):
        getattr(app, kind)(lambda job, out, kind=kind: events.append(f"{kind}:{type(out).__name__}"))

    @app.task
    async def gives_up() -> None:
        raise asyncio.CancelledError("an inner operation was cancelled")

    gives_up.enqueue()
    while app.queue(queue_name).counts()["failed"] == 0:  # a retry waits out its backoff
        _run(app, [queue_name], concurrency=1)
    assert events == ["on_retry:CancelledError", "on_failure:CancelledError"]
    app.close()


@pytest.mark.parametrize("runs_on", ["thread-worker", "asyncio", "asyncio-thread"])
@pytest.mark.parametrize("value", ["x" * 200, {1, 2}], ids=["too-large", "not-serialisable"])
def test_a_result_that_cannot_be_stored_runs_the_failure_hooks(redis_url, queue_name, runs_on, value):
    """The job fails for good (its return value cannot be stored), but the app ran the ``after``
    hooks, as for a success, and no failure hook: metrics counted it completed, tracing ended its
    span as a success, an alerting on_failure hook never heard of it."""
    app = Conveyor(redis_url, default_queue=queue_name, store_results=True, max_result_bytes=100,
                   keep_failed=-1)  # fmt: skip
    events = _outcome_hooks(app, runs_on)
    if runs_on == "asyncio":
        @app.task(max_attempts=3)
        async def produce() -> object:
            return value
    else:
        @app.task(max_attempts=3)
        def produce() -> object:
            return value

    job = produce.enqueue()
    Runner(app, [queue_name], burst=True, concurrency=1).run()
    error = "PayloadTooLargeError" if isinstance(value, str) else "SerializationError"
    assert events == [f"on_failure:{error}"]  # not retried: a rerun would fail the same way
    stored = app.queue(queue_name).get_job(job.id)
    assert stored.state == "failed" and stored.attempts == 1 and stored.error.startswith(f"{error}: ")
    app.close()
