"""Audit of per-key limits meeting the admin and recovery paths (cancel, release, retry, purge,
recovery, trim): each test failed before its fix, or pins a documented behaviour."""

from __future__ import annotations

import asyncio

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import JobSpec, Limit


def _due_in(api, q, job_id: str) -> float:
    """Ms until the delayed job ``job_id`` is due."""
    return api.admin.zscore(q.keys.delayed, job_id) - api.server_ms()


async def test_cancelling_a_rate_held_job_after_its_start_came_gives_the_start_back(api):
    """A job over its key's rate waits in the delayed set for the start it reserved; once that
    start comes, a promotion (any claim, or a maintenance tick) moves it to the waiting list, where
    it still holds the reservation until a worker claims it. Cancelled there, it kept the key's
    next start an interval ahead: the key's next job waited that interval for a start nobody
    took (rate 0.5/s: 2 s), where the same cancel a moment before the promotion gave it back."""
    q = api.queue()
    limit = Limit("rated", rate=0.5)  # starts 2 s apart
    first, second = (j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(2)]))
    [running] = await q.claim(count=2)
    assert running.id == first
    await asyncio.sleep(_due_in(api, q, second) / 1000 + 0.05)
    assert await q.promote() == 1  # its start came: waiting, its reservation still held
    assert (await q.get_job(second)).state == "waiting"
    assert await q.cancel(second)
    third = (await q.enqueue("t", 3, limit=limit)).id
    [started] = await q.claim()  # the start the cancelled job held, given back (it passed: now)
    assert started.id == third
    assert await q.counts() == counts(active=2)
