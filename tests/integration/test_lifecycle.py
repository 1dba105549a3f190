"""Job lifecycle on real servers, each body run on the sync and the async surface.

Enqueue, claim, ack, idempotent ids, batches, delays and promotion, retries with backoff, cancel,
retention and both RESP protocols.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import Backoff, InvalidNameError, JobSpec, SerializationError


async def test_full_lifecycle(api):
    q = api.queue(keep_completed=10, lease=5.0)
    assert await q.counts() == counts()

    job = await q.enqueue("send", {"to": "a", "n": [1, 2]})
    assert job.created is True
    assert job.state == "waiting"
    assert job.attempts == 0
    assert job.max_attempts == 3
    assert job.enqueued_at is not None and abs(job.enqueued_at - time.time()) < 60
    assert await q.counts() == counts(waiting=1)
    stored = await q.get_job(job.id)
    assert (stored.id, stored.task, stored.state, stored.payload) == (
        job.id, "send", "waiting", {"to": "a", "n": [1, 2]})
    assert stored.token is None

    before_ms = api.server_ms()
    [leased] = await q.claim()
    assert leased.id == job.id
    assert leased.task == "send"
    assert leased.payload == {"to": "a", "n": [1, 2]}
    assert leased.attempts == 1
    assert leased.token
    assert await q.counts() == counts(active=1)
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts, stored.token) == ("active", 1, None)  # token stays private
    deadline = api.admin.zscore(q.keys.active, job.id)
    assert before_ms + 4000 <= deadline <= api.server_ms() + 5000

    assert await q.claim() == []  # nothing else to claim
    assert await q.ack(leased) == []
    assert leased.state == "completed"
    assert leased.token is None
    assert await q.counts() == counts(completed=1, total_completed=1)
    stored = await q.get_job(job.id)
    assert stored.state == "completed"
    assert stored.token is None
    assert stored.finished_at is not None and abs(stored.finished_at - time.time()) < 60
    assert stored.payload == {"to": "a", "n": [1, 2]}


async def test_ack_deletes_the_job_when_nothing_is_kept(api):
    q = api.queue()  # keep_completed=0 by default
    job = await q.enqueue("t", 1)
    [leased] = await q.claim()
    await q.ack(leased)
    assert await q.get_job(job.id) is None
    assert await q.counts() == counts(total_completed=1)
    # nothing but the queue's meta and wake-up marker remains
    assert set(api.queue_keys()) <= {q.keys.meta.encode(), q.keys.marker.encode()}


async def test_ack_claims_the_next_jobs_in_the_same_call(api):
    q = api.queue()
    jobs = await q.enqueue_many([("t", i) for i in range(4)])
    [first] = await q.claim()
    assert first.id == jobs[0].id  # FIFO
    first_token = first.token
    nxt = await q.ack(first, claim=2)
    assert [j.id for j in nxt] == [jobs[1].id, jobs[2].id]
    assert all(j.token and j.state == "active" for j in nxt)
    assert len({j.token for j in nxt} | {first_token}) == 3
    assert await q.counts() == counts(waiting=1, active=2, total_completed=1)


async def test_idempotent_enqueue(api):
    q = api.queue()
    first = await q.enqueue("send", {"v": 1}, job_id="order-42", max_attempts=5)
    assert first.created is True
    assert first.id == "order-42"
    snap = api.snapshot()

    again = await q.enqueue("other", {"v": 2}, job_id="order-42", delay=10, max_attempts=1)
    assert again.created is False
    assert again.id == "order-42"
    assert (again.task, again.state, again.payload, again.max_attempts) == (
        "send", "waiting", {"v": 1}, 5)
    assert api.snapshot() == snap  # nothing new created, nothing changed
    assert await q.counts() == counts(waiting=1)

    # also inside a batch, next to new jobs; and once the job is active
    [leased] = await q.claim()
    batch = await q.enqueue_many([JobSpec("send", 3, job_id="order-42"), JobSpec("send", 4, job_id="new-1")])
    assert [(j.id, j.created, j.state) for j in batch] == [
        ("order-42", False, "active"), ("new-1", True, "waiting")]
    assert batch[0].attempts == 1
    assert batch[0].payload == {"v": 1}
    assert await q.counts() == counts(waiting=1, active=1)
    assert api.admin.hget(q.keys.jobs + "order-42", "k").decode() == leased.token  # lease untouched


async def test_generated_ids_are_unique_and_never_collide_with_given_ids(api):
    q = api.queue()
    jobs = await q.enqueue_many([("t", i) for i in range(50)])
    jobs += [await q.enqueue("t", i) for i in range(5)]
    ids = [j.id for j in jobs]
    assert len(set(ids)) == 55
    assert all(i.isdigit() for i in ids)
    assert await q.counts() == counts(waiting=55)


async def test_enqueue_many_validates_everything_before_sending(api):
    q = api.queue(max_payload_bytes=64)
    await q.enqueue("t", "existing")
    snap = api.snapshot()
    bad_batches = [
        ([("t", 1), ("t", 2), ("t", {1, 2})], SerializationError),
        ([("t", 1), ("", 2)], InvalidNameError),
        ([("t", 1), ("a{b}", 2)], InvalidNameError),
        ([JobSpec("t", 1), JobSpec("t", 2, job_id="123")], InvalidNameError),
        ([JobSpec("t", 1), JobSpec("t", "x" * 100)], ValueError),  # too large
        ([JobSpec("t", 1), JobSpec("t", 2, delay=-1)], ValueError),
        ([JobSpec("t", 1), JobSpec("t", 2, max_attempts=0)], ValueError),
        ([("t", 1)] * 1001, ValueError),
    ]
    for batch, error in bad_batches:
        with pytest.raises(error):
            await q.enqueue_many(batch)
        assert api.snapshot() == snap, f"batch {batch[:3]!r} left partial state"
    assert await q.enqueue_many([]) == []  # nothing to send (see test_audit_docs_claims.py)
    assert api.snapshot() == snap
    assert await q.counts() == counts(waiting=1)
    created = await q.enqueue_many([("t", i) for i in range(1000)])  # the limit itself is fine
    assert len(created) == 1000
    assert await q.counts() == counts(waiting=1001)


async def test_delay_and_promotion(api):
    q = api.queue()
    t0, before_ms = time.monotonic(), api.server_ms()
    job = await q.enqueue("later", "p", delay=0.4)
    after_ms = api.server_ms()
    assert job.state == "delayed"
    assert await q.counts() == counts(delayed=1)
    assert (await q.get_job(job.id)).state == "delayed"
    # due 400 ms after the server ran the enqueue, which happened between the two readings
    due = api.admin.zscore(q.keys.delayed, job.id)
    assert before_ms + 400 <= due <= after_ms + 400

    assert await q.claim() == []
    assert await q.promote() == 0
    if time.monotonic() - t0 < 0.3:
        assert await q.counts() == counts(delayed=1)

    while api.server_ms() < due:  # by the server's clock: a slow enqueue call made it due later
        await asyncio.sleep(0.02)
    assert await q.promote() == 1
    assert await q.counts() == counts(waiting=1)
    assert (await q.get_job(job.id)).state == "waiting"
    [leased] = await q.claim()
    assert leased.id == job.id
    assert leased.payload == "p"


async def test_claim_promotes_due_delayed_jobs(api):
    q = api.queue()
    job = await q.enqueue("later", None, delay=0.2)
    await asyncio.sleep(0.25)
    assert await q.counts() == counts(delayed=1)  # nobody promoted it yet
    [leased] = await q.claim()
    assert leased.id == job.id
    assert await q.counts() == counts(active=1)


async def test_promote_is_bounded_by_batch(api):
    q = api.queue()
    await q.enqueue_many([JobSpec("t", i, delay=0.05) for i in range(5)])
    await asyncio.sleep(0.1)
    assert await q.promote(batch=2) == 2
    assert await q.counts() == counts(waiting=2, delayed=3)
    assert await q.promote(batch=10) == 3
    assert await q.counts() == counts(waiting=5)


async def test_retries_with_backoff_then_failed(api):
    q = api.queue(backoff=Backoff(base=0.4, factor=2.0, cap=5.0, jitter=0.5))
    job = await q.enqueue("flaky", {"x": 1}, max_attempts=2)

    [leased] = await q.claim()
    assert leased.attempts == 1
    assert await q.fail(leased, "boom 1") == "retry"
    t0, now_ms = time.monotonic(), api.server_ms()
    assert await q.counts() == counts(delayed=1)
    stored = await q.get_job(job.id)
    assert (stored.state, stored.error, stored.attempts, stored.token) == ("delayed", "boom 1", 1, None)
    delay_ms = api.admin.zscore(q.keys.delayed, job.id) - now_ms
    # first retry: base * U(1 - jitter, 1) = 200..400 ms after the failure
    assert 100 <= delay_ms <= 400

    if time.monotonic() - t0 < 0.1:
        assert await q.claim() == []  # not before it is due
    await asyncio.sleep(max(0.0, delay_ms / 1000 - (time.monotonic() - t0)))
    # t0 was read before the server's clock, so poll briefly instead of trusting one claim
    claimed: list = []

    async def claimed_again() -> bool:
        claimed.extend(await q.claim())
        return bool(claimed)

    await wait_until(claimed_again, timeout=5.0, what="the retry to become due")
    [again] = claimed
    assert again.id == job.id
    assert again.attempts == 2
    assert again.token != leased.token

    assert await q.fail(again, ValueError("boom 2")) == "failed"
    assert again.state == "failed"
    assert await q.counts() == counts(failed=1, total_failed=1)
    stored = await q.get_job(job.id)
    assert stored.state == "failed"
    assert stored.error == "ValueError: boom 2"
    assert stored.attempts == 2
    assert stored.finished_at is not None
    assert await q.claim() == []


async def test_fail_without_retry_ends_in_failed(api):
    q = api.queue()
    job = await q.enqueue("t", 1, max_attempts=5)
    [leased] = await q.claim()
    assert await q.fail(leased, "fatal", retry=False) == "failed"
    assert await q.counts() == counts(failed=1, total_failed=1)
    assert (await q.get_job(job.id)).error == "fatal"


async def test_cancel(api):
    q = api.queue(keep_completed=5)
    waiting = await q.enqueue("t", 1)
    delayed = await q.enqueue("t", 2, delay=30)
    active = await q.enqueue("t", 3)
    done = await q.enqueue("t", 4)
    assert await q.counts() == counts(waiting=3, delayed=1)

    assert await q.cancel(waiting.id) is True
    assert await q.get_job(waiting.id) is None
    assert await q.cancel(delayed.id) is True
    assert await q.get_job(delayed.id) is None
    assert await q.counts() == counts(waiting=2)

    [leased] = await q.claim()
    assert leased.id == active.id
    [finished] = await q.claim()
    await q.ack(finished)
    assert finished.id == done.id
    snap = api.snapshot()
    assert await q.cancel(done.id) is False
    assert await q.cancel("no-such-job") is False
    assert await q.cancel(waiting.id) is False  # already cancelled
    assert api.snapshot() == snap
    assert await q.counts() == counts(active=1, completed=1, total_completed=1)
    # An active job is marked; its holder learns at its next heartbeat and settles it cancelled.
    assert await q.cancel(active.id) is True
    assert await q.counts() == counts(active=1, completed=1, total_completed=1)
    await q.extend(leased)
    assert leased.cancelled
    assert await q.fail(leased, "stopped") == "cancelled"
    assert await q.counts() == counts(completed=1, cancelled=1, total_completed=1)
    [listed] = await q.jobs("cancelled")
    assert (listed.id, listed.state) == (active.id, "cancelled")
    assert await q.cancel(active.id) is False  # finished


async def test_retention_keeps_the_newest_completed(api):
    q = api.queue(keep_completed=3)
    jobs = await q.enqueue_many([("t", i) for i in range(7)])
    for _ in jobs:
        [leased] = await q.claim()
        await q.ack(leased)
    assert await q.counts() == counts(completed=3, total_completed=7)
    kept = [j.id for j in jobs if await q.get_job(j.id) is not None]
    assert kept == [j.id for j in jobs[-3:]]
    assert [(await q.get_job(i)).state for i in kept] == ["completed"] * 3
    assert api.admin.zcard(q.keys.completed) == 3


async def test_retention_keeps_the_newest_failed(api):
    q = api.queue(keep_failed=2)
    jobs = await q.enqueue_many([JobSpec("t", i, max_attempts=1) for i in range(5)])
    for _ in jobs:
        [leased] = await q.claim()
        assert await q.fail(leased, f"err {leased.id}") == "failed"
    assert await q.counts() == counts(failed=2, total_failed=5)
    survivors = [j.id for j in jobs if await q.get_job(j.id) is not None]
    assert survivors == [j.id for j in jobs[-2:]]


async def test_retention_by_age_with_trim(api):
    q = api.queue(keep_completed=-1, completed_max_age=0.2)
    for _ in await q.enqueue_many([("t", i) for i in range(3)]):
        [leased] = await q.claim()
        await q.ack(leased)
    assert await q.trim() == 0  # not old enough yet
    assert await q.counts() == counts(completed=3, total_completed=3)
    await asyncio.sleep(0.3)
    assert await q.trim(batch=2) == 2  # bounded
    assert await q.trim() == 1
    assert await q.counts() == counts(total_completed=3)
    assert set(api.queue_keys()) <= {q.keys.meta.encode(), q.keys.marker.encode()}


@pytest.mark.parametrize("protocol", [2, 3])
async def test_resp_protocols(api, protocol):
    q = api.queue(protocol=protocol, keep_completed=-1)
    # HELLO with the version: a bare HELLO answers in RESP2 on Dragonfly even on a RESP3 link.
    if api.driver == "glide":  # glide hands HELLO back as a map on either protocol
        info = await q.raw("execute_command", "CLIENT", "INFO")
        assert f"resp={protocol}" in info.decode()
    else:
        hello = await q.raw("execute_command", "HELLO", protocol)
        assert isinstance(hello, dict) == (protocol == 3)  # a RESP3 map, or a RESP2 array
        version = hello[b"proto"] if isinstance(hello, dict) else hello[hello.index(b"proto") + 1]
        assert int(version) == protocol

    job = await q.enqueue("send", {"ü": "ß", "n": 1.5}, job_id="resp-job")
    assert job.created
    again = await q.enqueue("send", None, job_id="resp-job")
    assert again.created is False
    assert again.payload == {"ü": "ß", "n": 1.5}
    delayed = await q.enqueue("send", [1], delay=0.05)
    assert await q.counts() == counts(waiting=1, delayed=1)
    await asyncio.sleep(0.1)
    claimed = await q.claim(count=5)
    assert {j.id for j in claimed} == {"resp-job", delayed.id}
    await q.extend(claimed[0], lease=10)
    assert await q.fail(claimed[1], "nope", retry=False) == "failed"
    await q.ack(claimed[0])
    assert await q.counts() == counts(completed=1, failed=1, total_completed=1, total_failed=1)
    stored = await q.get_job("resp-job")
    assert (stored.state, stored.payload, stored.attempts) == ("completed", {"ü": "ß", "n": 1.5}, 1)
    assert (await q.get_job(delayed.id)).error == "nope"
    assert await q.cancel("resp-job") is False
    assert await q.promote() == 0
    assert await q.recover() == (0, 0)
    assert await q.trim() == 0


async def test_a_retry_without_delay_leaves_the_job_waiting_and_says_so(api):
    """A retry whose backoff is 0 s goes straight back to the waiting list; fail() marked the job
    'delayed' all the same, a state it never had."""
    q = api.queue(backoff=Backoff(base=0))
    job = await q.enqueue("flaky", None, max_attempts=2)
    [leased] = await q.claim()
    assert await q.fail(leased, "boom") == "retry"
    assert leased.state == (await q.get_job(job.id)).state == "waiting"
