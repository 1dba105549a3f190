"""A Runner whose worker for one queue fails lets the others stop within their own shutdown timeout.

The test failed before its fix: the asyncio Runner gave the other queues' workers a fixed 30 s,
whatever --shutdown-timeout said, then cancelled them with their jobs.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from _support import run_in_thread
from conveyor import AsyncWorker, Conveyor, SchemaVersionError
from conveyor._runner import Runner

NEWER = "2"  # a layout version this Conveyor does not read
FIXED_WAIT = 30.0  # seconds the Runner used to give the other workers, whatever their timeout
SHUTDOWN_TIMEOUT = 60.0


@pytest.mark.slow
def test_a_failing_queue_leaves_the_other_queues_jobs_their_whole_shutdown_timeout(
    redis_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queue `long` runs a job that needs FIXED_WAIT + 2 s more once queue `bad`'s worker has
    ended with an error (SchemaVersionError, the one a worker's run() ends with; injected here, as
    a worker's layout is checked once, at its first call). With --shutdown-timeout 60 the job must
    finish and be acknowledged once; before the fix the Runner cancelled it after 30 s."""
    long_q, bad_q = f"{queue_name}-long", f"{queue_name}-bad"
    app = Conveyor(redis_url, store_results=True)
    started, runs = threading.Event(), []

    @app.task(queue=long_q)
    async def slow() -> str:
        runs.append(time.monotonic())
        started.set()
        await asyncio.sleep(FIXED_WAIT + 2)
        return "done"

    @app.task(queue=bad_q)
    async def other() -> None:
        pass

    run_worker = AsyncWorker.run

    async def fail_on_bad(worker: AsyncWorker) -> dict[str, int]:
        if worker.queue.name != bad_q:
            return await run_worker(worker)
        while not started.is_set():
            await asyncio.sleep(0.05)
        raise SchemaVersionError(f"queue {bad_q!r} was written with data layout version {NEWER}")

    monkeypatch.setattr(AsyncWorker, "run", fail_on_bad)
    job = app.queue(long_q).enqueue("slow")
    runner = Runner(app, [long_q, bad_q], concurrency=1, shutdown_timeout=SHUTDOWN_TIMEOUT, block_timeout=0.2)
    thread, outcome = run_in_thread(runner.run)
    try:
        assert started.wait(15), "the long job did not start"
        thread.join(FIXED_WAIT + 20)
        assert not thread.is_alive(), "the Runner did not return"
        assert outcome and isinstance(outcome[0], SchemaVersionError), outcome
        checker = Conveyor(redis_url, store_results=True).queue(long_q)
        counted = checker.counts()
        assert (counted["waiting"], counted["active"], counted["total_completed"]) == (0, 0, 1), counted
        assert checker.result(job.id, timeout=1) == "done" and len(runs) == 1, runs
        checker.close()
    finally:
        runner.stop()
        thread.join(5)
        app.close()
