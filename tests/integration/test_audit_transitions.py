"""Audit of the atomic state transitions and their client side: defects found, each test failing
before its fix."""

from __future__ import annotations

import pytest
from _support import api_fixture, with_token  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import Backoff, ConveyorError, JobCancelledError, JobFailedError, JobSpec, LeaseLostError, Limit


async def test_an_existing_job_returned_by_enqueue_has_its_stored_fields(api):
    """Enqueueing a caller-given id that exists returns the existing job (created False). Its
    priority, time limit, error and finish time were not in the enqueue reply: the job read priority
    0 and no time limit (the stored job has level 7 and 3 s), and a failed one no error, where
    get_job() and jobs() report them."""
    q = api.queue()
    first = await q.enqueue("t", 1, job_id="kept", priority=7, time_limit=3)
    again = await q.enqueue("t", 2, job_id="kept")
    assert not again.created
    assert (again.priority, again.time_limit) == (first.priority, first.time_limit) == (7, 3.0)
    [same] = await q.enqueue_many([JobSpec("t", 3, job_id="kept", priority=1)])
    assert (same.created, same.priority, same.time_limit, same.payload) == (False, 7, 3.0, 1)

    assert await q.cancel("kept")
    await q.enqueue("t", job_id="broken", max_attempts=1)
    [job] = await q.claim()
    await q.fail(job, "boom")
    failed = await q.enqueue("t", job_id="broken")
    stored = await q.get_job("broken")
    assert (failed.state, failed.error, failed.finished_at) == ("failed", "boom", stored.finished_at)
    assert failed.finished_at is not None
    assert (failed.priority, failed.time_limit) == (0, None)


async def test_keep_failed_zero_keeps_the_failure_and_cancel_results(api):
    """keep_failed=0 keeps no failed or cancelled job, as keep_completed=0 keeps no completed one;
    a success's result then stays for result_ttl, but a final failure's (and a cancel's) was deleted
    by the same call that stored it: result() said the job had no stored result (ConveyorError)
    instead of raising JobFailedError / JobCancelledError, and the failure was visible nowhere."""
    q = api.queue(keep_failed=0, store_results=True)
    failing = await q.enqueue("t", 1, max_attempts=1)
    stopped = await q.enqueue("t", 2)
    [first, second] = await q.claim(count=2)
    assert await q.fail(first, "boom") == "failed"
    assert await q.cancel(stopped.id)
    assert await q.fail(second, "stopped") == "cancelled"
    assert (await q.counts())["failed"] == (await q.counts())["cancelled"] == 0
    with pytest.raises(JobFailedError) as failed:
        await q.result(failing.id, timeout=1)
    assert (failed.value.error, failed.value.attempts) == ("boom", 1)
    with pytest.raises(JobCancelledError):
        await q.result(stopped.id, timeout=1)


@pytest.mark.parametrize(
    ("retry", "outcome", "state"), [(True, "retry", "delayed"), (False, "failed", "failed")]
)
async def test_a_fail_sent_again_after_its_reply_was_lost_gets_the_same_answer(api, retry, outcome, state):
    """A worker whose fail call lost its reply (connection cut after the server ran it) sends it
    again with the same token. The first had cleared the lease, so the second was refused as
    "does not hold the lease": the worker logged a lost lease and did not count the failure,
    though the job had failed exactly once. It now gets the first call's answer; nothing changes."""
    q = api.queue(keep_failed=-1)
    await q.enqueue("t", 1, max_attempts=2)
    [job] = await q.claim()
    resent = with_token(job, job.token)
    assert await q.fail(job, "boom", retry=retry) == outcome
    snap, before = api.snapshot(), await q.counts()
    assert await q.fail(resent, "boom", retry=retry) == outcome
    assert api.snapshot() == snap and await q.counts() == before
    assert (await q.get_job(job.id)).state == state


async def test_a_fail_re_sent_after_the_job_was_claimed_again_still_changes_nothing(api):
    """The re-sent fail of attempt 1 reaches the server after attempt 2 was claimed: it must not
    touch attempt 2's lease, and a fail with any other stale token stays refused."""
    q = api.queue(keep_failed=-1, keep_completed=-1, backoff=Backoff(base=0, cap=0))
    await q.enqueue("t", 1, max_attempts=3)
    [first] = await q.claim()
    resent = with_token(first, first.token)
    await q.fail(first, "boom", retry=True)
    [second] = await q.claim()
    assert await q.fail(resent, "boom", retry=True) == "retry"
    assert (await q.get_job(second.id)).state == "active"
    with pytest.raises(LeaseLostError, match="does not hold the lease"):
        await q.fail(with_token(second, second.token + "0"), "x")
    await q.ack(second)
    assert (await q.get_job(second.id)).state == "completed"


async def _start_order(q, limit: int = 50) -> list[str]:
    """Claim and ack one job at a time until none is left; the ids in the order they started."""
    started: list[str] = []
    for _ in range(limit):
        got = await q.claim(count=1)
        for job in got:
            started.append(job.id)
            await q.ack(job)
        if not got and not (await q.counts())["waiting"]:
            return started
    raise AssertionError(f"jobs left after {limit} claims: {await q.counts()}")


@pytest.mark.parametrize("delay", [0, 60], ids=["ready", "delayed"])
async def test_cancelling_a_job_that_held_no_turn_of_its_key_keeps_the_keys_start_order(api, delay):
    """Concurrency 1, five jobs of one key: A runs, B and C are parked, D waits (ready or delayed),
    E waits. A's ack releases B (the key's turn) to the claim end. Cancelling D (never parked, no
    turn) handed a second turn to C, pushed to the claim end after B: C started before B."""
    q = api.queue()
    limit = Limit("turns", concurrency=1)
    specs = [JobSpec("t", i, limit=limit, delay=delay if i == 3 else 0) for i in range(5)]
    a, b, c, d, e = [j.id for j in await q.enqueue_many(specs)]
    [first] = await q.claim(count=1)
    assert first.id == a
    assert await q.claim(count=1) == [] and await q.claim(count=1) == []  # B, then C parked
    await q.ack(first)
    assert await q.cancel(d)
    assert await _start_order(q) == [b, c, e]


@pytest.mark.parametrize(("op", "verb"), [("retry_failed", "re-queued"), ("purge_failed", "deleted")])
async def test_a_batch_of_failed_jobs_that_errors_says_how_many_earlier_batches_did(api, op, verb):
    """retry_failed / purge_failed send one script call per batch; when a later batch failed, the
    caller got the server's error alone, with no word of the jobs the earlier batches had already
    re-queued or deleted. (A job key of the wrong type stands in for any failing call: the script
    errors at its first read, changing nothing.)"""
    q = api.queue(keep_failed=-1)
    ids = [j.id for j in await q.enqueue_many([JobSpec("t", i, max_attempts=1) for i in range(4)])]
    for job in await q.claim(count=4):
        await q.fail(job, "boom")
    api.admin.set(f"cv:{{{api.name}}}:j:broken", "x")
    # batches of 2, the last first: the third and fourth jobs go, then 'broken' errors at once
    with pytest.raises(ConveyorError) as caught:
        await getattr(q, op)(["broken", ids[0], ids[2], ids[3]], batch=2)
    assert f"2 failed job(s) were already {verb}" in str(caught.value)
    assert (await q.counts())["failed"] == 2


@pytest.mark.parametrize("cancel", [False, True], ids=["failed", "cancelled"])
async def test_a_fail_re_sent_after_retention_deleted_its_job_gets_the_same_answer(api, cancel):
    """keep_failed=0: the fail that ends a job (failed, or cancelled while it ran) deletes it in
    the same call, and with it the job's record of that fail (o). Sent again after its reply was
    lost, the fail was refused as 'no such job': the worker logged a lost lease and did not count
    the failure. A record of the fail now outlives the job for one lease."""
    q = api.queue(keep_failed=0, lease=5)
    await q.enqueue("t", 1, max_attempts=1)
    [job] = await q.claim()
    if cancel:
        assert await q.cancel(job.id)
    token = job.token
    resent = with_token(job, token)
    outcome = "cancelled" if cancel else "failed"
    assert await q.fail(job, "boom") == outcome
    assert await q.get_job(job.id) is None
    counts_before = await q.counts()
    assert await q.fail(resent, "boom") == outcome
    assert await q.counts() == counts_before
    with pytest.raises(LeaseLostError, match="no such job"):
        await q.fail(with_token(job, token + "0"), "x")  # any other token: still refused
    records = [k for k in api.queue_keys() if k.startswith(f"cv:{{{api.name}}}:j:".encode())]
    assert len(records) == 1 and 0 < api.admin.pttl(records[0]) <= 5000  # gone after one lease
