"""A handler stopped while its thread runs on (a thread cannot be interrupted) keeps its limit
key's slot until the thread returns (production.md, Limits): the Worker's threads are covered in
test_limits.py; here, an AsyncWorker's sync app task, whose thread the worker sees end only by
polling (Dispatcher.runs_on), and a burst worker, which waits for the held slot to free the key's
parked job instead of ending with it parked."""

from __future__ import annotations

import time

from conveyor import Backoff, Conveyor, Limit
from conveyor._runner import Runner


def test_an_asyncio_workers_sync_task_past_its_limit_holds_its_keys_slot_until_its_thread_ends(
    redis_url, queue_name
):
    app = Conveyor(redis_url, default_queue=queue_name, maintenance_interval=0.1, lease=1.0,
                   backoff=Backoff(base=0.02, cap=0.05), keep_failed=-1, keep_completed=-1)  # fmt: skip
    spans: dict[str, list[float]] = {}
    limit = Limit("one-at-a-time", concurrency=1)

    @app.task
    async def unused() -> None:  # one async task puts the queue on asyncio
        pass

    @app.task(time_limit=0.3, limit=limit)
    def stuck() -> None:  # ignores current_job().cancelled
        spans["stuck"] = [time.monotonic()]
        time.sleep(1.5)
        spans["stuck"].append(time.monotonic())

    @app.task(limit=limit)
    def quick() -> None:
        spans["quick"] = [time.monotonic()]

    app.queue(queue_name).enqueue_many([stuck.spec(), quick.spec()])
    stats = Runner(app, [queue_name], burst=True, concurrency=2).run()
    assert stats[queue_name] == {"processed": 1, "failed": 1, "held": 0}
    assert len(spans["stuck"]) == 2 and spans["quick"][0] >= spans["stuck"][1]
    [failed] = app.queue(queue_name).jobs("failed")
    assert failed.task == "stuck" and failed.error is not None and failed.error.startswith("timed out")
    app.close()
