"""Failed-job operations: list by state with paging, retry one/some/all (attempts reset), purge."""

from __future__ import annotations

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)


async def _failed_jobs(q, n: int) -> list[str]:
    """n jobs that used their single attempt and failed, oldest first."""
    jobs = await q.enqueue_many([("t", i) for i in range(n)])
    for job in await q.claim(count=n):
        await q.fail(job, f"boom {job.payload}", retry=False)
    return [j.id for j in jobs]


async def test_list_jobs_by_state_with_paging(api):
    q = api.queue(keep_completed=-1, keep_failed=-1, max_attempts=1)
    ids = [j.id for j in await q.enqueue_many([("t", i) for i in range(5)])]
    page1 = await q.jobs("waiting", offset=0, limit=2)
    page2 = await q.jobs("waiting", offset=2, limit=2)
    page3 = await q.jobs("waiting", offset=4, limit=2)
    assert [j.id for j in page1 + page2 + page3] == ids  # claim order, no gaps, no repeats
    assert all(j.state == "waiting" and j.token is None for j in page1)
    [first] = await q.claim()
    assert [j.id for j in await q.jobs("active")] == [first.id]
    await q.fail(first, "bad", retry=False)
    [second] = await q.claim()
    await q.ack(second)
    assert [(j.id, j.error) for j in await q.jobs("failed")] == [(first.id, "bad")]
    assert [j.id for j in await q.jobs("completed")] == [second.id]
    assert await q.jobs("delayed") == []
    with pytest.raises(ValueError, match="state must be one of"):
        await q.jobs("finished")
    with pytest.raises(ValueError, match="limit"):
        await q.jobs("failed", limit=0)


async def test_retry_one_some_and_all_failed_jobs(api):
    q = api.queue(keep_failed=-1, max_attempts=1)
    ids = await _failed_jobs(q, 7)
    assert await q.counts() == counts(failed=7, total_failed=7)

    assert await q.retry_failed([ids[0]]) == 1
    assert await q.retry_failed([ids[1], ids[2], "no-such-job"]) == 2
    again = await q.get_job(ids[0])
    assert (again.state, again.attempts) == ("waiting", 0)  # a fresh start
    assert await q.counts() == counts(waiting=3, failed=4, total_failed=7)

    assert await q.retry_failed(batch=3) == 4  # all, in batches of 3
    assert await q.counts() == counts(waiting=7, total_failed=7)
    assert await q.retry_failed() == 0
    claimed = await q.claim(count=10)
    assert sorted(j.id for j in claimed) == sorted(ids)
    assert all(j.attempts == 1 for j in claimed)  # attempts were reset


async def test_purge_failed_jobs(api):
    q = api.queue(keep_failed=-1, max_attempts=1)
    ids = await _failed_jobs(q, 5)
    waiting = await q.enqueue("t", "keep me")
    assert await q.purge_failed([ids[0], waiting.id, ids[0]]) == 1  # failed jobs only, a repeat once
    assert await q.get_job(ids[0]) is None
    assert await q.purge_failed(batch=2) == 4
    assert await q.counts() == counts(waiting=1, total_failed=5)
    assert [k for k in api.queue_keys() if b":j:" in k] == [q.keys.jobs.encode() + waiting.id.encode()]


async def test_failed_ops_refuse_bad_input_and_change_nothing(api):
    q = api.queue(keep_failed=-1, max_attempts=1)
    await _failed_jobs(q, 2)
    snap = api.snapshot()
    with pytest.raises(ValueError, match="batch"):
        await q.retry_failed(batch=0)
    with pytest.raises(TypeError, match="not one string"):
        await q.purge_failed("abc")
    with pytest.raises(ValueError, match="must not contain"):
        await q.retry_failed(["ok", "{bad}"])
    assert api.snapshot() == snap
