"""enqueue.lua's two paths and its wake-ups, on real servers (sync and async surfaces).

A lone enqueue of a new job (generated id, no options) takes the script's short path; anything
else takes the general one. Both must leave the same job behind. The marker gets a wake-up only
when the waiting list was empty before the call: a non-empty list already has one pending.
"""

from __future__ import annotations

import pytest
from _support import api_fixture  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import JobSpec


def _stored(api, q, job_id):
    fields = api.admin.hgetall(q.keys.jobs + job_id)
    assert fields.pop(b"e")  # enqueued at: differs between the calls
    return fields


async def test_a_lone_enqueue_leaves_the_same_job_as_a_batch(api):
    q = api.queue()
    lone = await q.enqueue("send", {"to": "a"})
    pair = await q.enqueue_many([("send", {"to": "a"}), ("send", {"to": "a"})])
    assert _stored(api, q, lone.id) == _stored(api, q, pair[0].id)
    assert [int(j.id) for j in (lone, *pair)] == [int(lone.id) + i for i in range(3)]
    for job in (lone, *pair):
        assert (job.created, job.state, job.attempts, job.max_attempts) == (True, "waiting", 0, 3)
        assert job.enqueued_at is not None
    assert api.admin.lrange(q.keys.waiting, 0, -1) == [j.id.encode() for j in (pair[1], pair[0], lone)]


async def test_a_lone_enqueue_with_an_id_or_options_still_works(api):
    q = api.queue()
    first = await q.enqueue("send", 1, job_id="order-1")
    again = await q.enqueue("send", 2, job_id="order-1")
    assert (first.created, again.created, again.payload) == (True, False, 1)
    later = await q.enqueue("send", 3, delay=60)
    urgent = await q.enqueue("send", 4, priority=5)
    assert (later.state, urgent.state, urgent.priority) == ("delayed", "waiting", 5)


@pytest.mark.parametrize("batch", [1, 3])
async def test_enqueue_wakes_only_when_the_waiting_list_was_empty(api, batch):
    q = api.queue()
    marker = q.keys.marker

    async def add():
        return await (q.enqueue("t", 0) if batch == 1 else q.enqueue_many([("t", i) for i in range(batch)]))

    await add()
    assert api.admin.zcard(marker) == 1
    api.admin.zpopmin(marker)  # as an idle worker's wait does; its claim re-adds it if work remains
    await add()
    assert api.admin.zcard(marker) == 0  # the list was not empty: the pending wake-up stands for it
    await q.enqueue("t", 0, delay=60)  # a delayed job still wakes (to re-time the wait)
    assert api.admin.zcard(marker) == 1
    api.admin.zpopmin(marker)
    assert len(await q.claim(2 * batch)) == 2 * batch  # takes everything ready: nothing re-armed
    assert api.admin.zcard(marker) == 0
    await add()
    assert api.admin.zcard(marker) == 1


async def test_a_claim_that_leaves_work_behind_re_adds_the_wake_up(api):
    q = api.queue()
    await q.enqueue_many([JobSpec("t", i) for i in range(3)])
    api.admin.zpopmin(q.keys.marker)
    await q.enqueue("t", 3)
    assert api.admin.zcard(q.keys.marker) == 0
    assert len(await q.claim(1)) == 1
    assert api.admin.zcard(q.keys.marker) == 1  # the next idle worker wakes for the other three
