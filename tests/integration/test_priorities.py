"""Priorities: levels 0..9, the highest non-empty level claimed first, FIFO within a level, and every
path that puts a job back (promote, retry, release, recovery, retry_failed) keeps its level."""

from __future__ import annotations

import asyncio

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import JobSpec


async def _enqueue_levels(q, levels: list[int]) -> list[str]:
    jobs = await q.enqueue_many([JobSpec("t", i, priority=p) for i, p in enumerate(levels)])
    return [j.id for j in jobs]


async def test_highest_level_first_fifo_within_a_level(api):
    q = api.queue(keep_completed=-1)
    a, b, c, d, e = await _enqueue_levels(q, [0, 5, 9, 5, 0])
    single = await q.enqueue("t", "one", priority=9)  # the single-job path too
    assert (await q.counts())["waiting"] == 6
    assert [j.id for j in await q.jobs("waiting")] == [c, single.id, b, d, a, e]
    assert [j.id for j in await q.jobs("waiting", offset=2, limit=3)] == [b, d, a]
    assert [(await q.get_job(i)).priority for i in (a, b, c)] == [0, 5, 9]
    first = await q.claim(count=3)  # spans two levels in one call
    assert [j.id for j in first] == [c, single.id, b]
    claimed = await q.ack(first[0], claim=2)  # the ack+claim path serves levels the same way
    assert [j.id for j in claimed] == [d, a]
    assert [j.id for j in await q.claim(count=5)] == [e]
    assert await q.claim() == []
    assert api.admin.exists(f"cv:{{{api.name}}}:w:l") == 0  # no stale level left behind


async def test_strict_priority_starves_lower_levels_while_higher_work_arrives(api):
    """Documented behaviour: no aging. A level-0 job waits as long as higher levels have work."""
    q = api.queue()
    [low] = await _enqueue_levels(q, [0])
    for _ in range(10):
        high = await q.enqueue("t", "high", priority=1)
        [job] = await q.claim()
        assert job.id == high.id
        await q.ack(job)
    assert [j.id for j in await q.claim()] == [low]


async def test_jobs_put_back_keep_their_level(api):
    q = api.queue(keep_failed=-1, max_attempts=3)
    delayed = await q.enqueue("t", "later", priority=7, delay=0.05)
    [plain] = await _enqueue_levels(q, [0])
    await asyncio.sleep(0.1)
    [job] = await q.claim()  # the claim promotes the due job into level 7, ahead of level 0
    assert job.id == delayed.id
    await q.release([job])
    [job] = await q.claim()
    assert job.id == delayed.id  # released to the front of its level
    await q.fail(job, "boom", retry=False)
    assert await q.retry_failed([job.id]) == 1
    [job] = await q.claim()
    assert job.id == delayed.id  # retried into its level
    await q.fail(job, "again", retry=False)
    await q.retry_failed([job.id])
    assert await q.cancel(job.id)
    assert (await q.counts())["waiting"] == 1
    assert [j.id for j in await q.claim()] == [plain]


async def test_recovered_job_keeps_its_level(api):
    q = api.queue(lease=0.05)
    [plain, urgent] = await _enqueue_levels(q, [0, 3])
    [job] = await q.claim()
    assert job.id == urgent
    await asyncio.sleep(0.1)
    assert await q.recover() == (1, 0)
    assert [j.id for j in await q.claim(count=2)] == [urgent, plain]


async def test_priority_out_of_range_is_refused_naming_the_value(api):
    q = api.queue()
    for bad in (10, -1, True, "high", 2.0):
        with pytest.raises(ValueError, match=f"priority must be an int in 0..9.*got {bad!r}"):
            await q.enqueue_many([JobSpec("t", 1), JobSpec("t", 2, priority=bad)])
        with pytest.raises(ValueError, match="priority"):
            await q.enqueue("t", priority=bad)
    assert await q.counts() == counts()  # nothing half-written
