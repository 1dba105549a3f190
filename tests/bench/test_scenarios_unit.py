"""Scenario logic that needs no server: reply order, sizing."""

from __future__ import annotations

import asyncio
from collections import deque
from types import SimpleNamespace
from typing import Any

from bench.scenarios import lifecycle
from bench.scenarios._common import Target, Tracker, run_async, sized_jobs


class SlowReplyQueue:
    """A queue where job 2's enqueue reply arrives late, after another task could claim it
    (what Dragonfly did: KeyError '6' in the lifecycle warm-up)."""

    def __init__(self) -> None:
        self.waiting: deque[str] = deque()
        self.created = self.completed = 0

    async def enqueue(self, task: str, payload: Any) -> Any:
        self.created += 1
        job_id = str(self.created)
        self.waiting.append(job_id)
        await asyncio.sleep(0.05 if job_id == "2" else 0)
        return SimpleNamespace(id=job_id)

    async def claim(self, count: int) -> list[Any]:
        await asyncio.sleep(0)
        return [SimpleNamespace(id=self.waiting.popleft())] if self.waiting else []

    async def ack(self, job: Any) -> None:
        self.completed += 1

    async def cancel(self, job_id: str) -> None:
        self.waiting.remove(job_id)

    async def counts(self) -> dict[str, int]:
        return {"waiting": len(self.waiting), "active": 0, "total_completed": self.completed}

    async def aclose(self) -> None:
        pass


def test_lifecycle_pairs_enqueue_and_ack_whatever_order_replies_arrive(monkeypatch) -> None:
    fake = SlowReplyQueue()
    monkeypatch.setattr(lifecycle, "make_async_queue", lambda *a, **k: fake)
    tracker = Tracker()
    target = Target("x", "valkey", None, "default", "redis://127.0.0.1:1/0")
    params = {"payload_bytes": 64, "concurrency": 4, "min_seconds": 0.1}
    elapsed, latencies = asyncio.run(lifecycle._measure(target, params, tracker))
    assert tracker.verify()["acked"] == len(latencies) == fake.completed > 4
    assert all(x > 0 for x in latencies) and elapsed >= 0.1


def test_sized_jobs_covers_the_duration_within_bounds() -> None:
    assert sized_jobs(10_000, 2.0, 500, 100_000) == 22_001
    assert sized_jobs(10, 2.0, 500, 100_000) == 500
    assert sized_jobs(1e9, 2.0, 500, 100_000) == 100_000


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_run_async_uses_the_targets_event_loop() -> None:
    base = dict(server="s", family="valkey", version=None, config="default", url="redis://x")
    assert run_async(Target(**base), _loop_module()).startswith("asyncio")
    assert run_async(Target(**base, loop="uvloop"), _loop_module()).startswith("uvloop")


def test_enqueue_rows_record_client_cpu_per_job() -> None:
    from bench.scenarios.enqueue_single import outcome  # noqa: PLC0415

    report = {"ok": True}
    single = outcome([str(i) for i in range(400)], [0.001] * 400, 0.5, report, 0.02)
    bulk = outcome([str(i) for i in range(500)], [0.01] * 10, 0.5, report, 0.004, per_batch=True)
    assert single["metrics"]["client_cpu_us_per_job"] == [50.0, "us"]  # 0.02 s / 400 jobs
    assert bulk["metrics"]["client_cpu_us_per_job"] == [8.0, "us"]  # 0.004 s / 500 jobs
