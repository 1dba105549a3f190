"""When an idle worker learns that a delayed (or rate-held) job is due.

A worker learns the next due time from its own claim's reply, and only from a claim that left a
slot free. A claim that filled every slot of its worker, and so carried no due time, told no other
worker either: an idle worker then started a due job only at its own block timeout (default 2 s)
or at a maintenance promotion (every `maintenance_interval`), not "a few ms after the due time"
(production.md, Rate limits). `maintenance_interval=5` keeps the promotion out of the measure.
"""

from __future__ import annotations

import asyncio
import time

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    wait_until,
)
from conveyor import JobSpec, Limit

DELAY = 0.3
LATE_OK = 0.25  # a few ms, plus a loaded machine's scheduling


def _recorder(api, starts: dict[str, float]):
    return api.handler(start=lambda job: starts.setdefault(str(job.payload), time.monotonic()))


async def _two_idle_workers(api, q, starts: dict[str, float]) -> None:
    handlers = {"long": api.handler(sleep=3.0), "t": _recorder(api, starts)}
    for _ in range(2):
        api.worker(q, handlers, concurrency=1)
    await asyncio.sleep(0.3)  # both waiters block on the marker, each pump asleep for its block timeout


async def test_a_delayed_job_enqueued_with_a_job_that_fills_a_worker_starts_when_due(api):
    """One call enqueues a long job and one delayed by 300 ms: its one wake-up goes to one worker,
    whose claim of the long job fills it (the reply carries no due time); the other worker, idle,
    was never told."""
    q = api.queue(maintenance_interval=5.0)
    starts: dict[str, float] = {}
    await _two_idle_workers(api, q, starts)
    sent = time.monotonic()
    await q.enqueue_many([JobSpec("long"), JobSpec("t", "delayed", delay=DELAY)])
    await wait_until(lambda: "delayed" in starts, timeout=8, what="the delayed job's start")
    late = starts["delayed"] - (sent + DELAY)
    assert late < LATE_OK, f"the delayed job started {late * 1000:.0f} ms after it was due"


async def test_a_rate_held_job_starts_at_its_reserved_start_on_an_idle_worker(api):
    """A guard, passing before the fix too: the claim that reserves the second job's start 300 ms
    on (a rate Limit) claims fewer jobs than its count, so its reply carries the due time, and the
    first job's worker is the other one (the second job was still ready after the first claim)."""
    q = api.queue(maintenance_interval=5.0)
    starts: dict[str, float] = {}
    await _two_idle_workers(api, q, starts)
    limit = Limit("audit-due", rate=1 / DELAY)
    sent = time.monotonic()
    await q.enqueue_many([JobSpec("long", limit=limit), JobSpec("t", "held", limit=limit)])
    await wait_until(lambda: "held" in starts, timeout=8, what="the held job's start")
    late = starts["held"] - (sent + DELAY)
    assert late < LATE_OK, f"the rate-held job started {late * 1000:.0f} ms after its reserved start"
