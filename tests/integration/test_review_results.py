"""Review of results, cancellation and per-key limits: defects found, each test failing before its fix."""

from __future__ import annotations

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import JobSpec, Limit


async def test_cancelling_a_released_parked_job_hands_its_turn_to_the_next_parked_one(api):
    """A freed slot releases one parked job of its key to the waiting list: that job carries the
    key's turn. Before, cancelling it (or cancelling it while it waited out its rate reservation)
    dropped the turn: the key had no job running and its other parked jobs stayed parked for ever
    (counted as waiting, never claimable)."""
    q = api.queue()
    limit = Limit("tenant-r", concurrency=1)
    first, released, last = (
        j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(3)])
    )
    [running] = await q.claim(count=3)  # one runs, two parked
    assert running.id == first
    assert await q.ack(running) == []  # the freed slot released the oldest parked job
    assert await q.cancel(released)
    [job] = await q.claim(count=3)  # the other parked job must not be left behind
    assert job.id == last
    await q.ack(job)
    assert await q.counts() == counts(total_completed=2)


async def test_cancelling_a_rate_delayed_released_job_hands_its_turn_on(api):
    """As above, for a released job that then waited in the delayed set for its key's next start
    (concurrency and rate on one key): cancelling it there left the other parked job stuck."""
    q = api.queue()
    limit = Limit("tenant-rr", concurrency=1, rate=0.5)  # starts 2 s apart
    first, released, last = (
        j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(3)])
    )
    [running] = await q.claim(count=3)
    assert running.id == first
    assert await q.ack(running, claim=3) == []  # released, then held back by the rate: delayed
    assert [j.id for j in await q.jobs("delayed")] == [released]
    assert await q.cancel(released)
    assert await q.claim(count=3) == []  # the next start is reserved ~2 s ahead
    assert (await q.counts())["waiting"] + (await q.counts())["delayed"] == 1
    assert [j.id for j in await q.jobs("delayed")] + [j.id for j in await q.jobs("waiting")] == [last]
