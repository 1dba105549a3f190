"""Audit of the documentation's promises: each test pins a promise the docs make; those marked
failed before their fix."""

from __future__ import annotations

import asyncio
import time

import pytest
from _support import api_fixture, counts, wait_until  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import (
    AsyncQueue,
    Backoff,
    ConnectionFailedError,
    Conveyor,
    ConveyorError,
    JobSpec,
    LeaseLostError,
    Queue,
    QueueSettings,
    ServerConfigError,
    redact_url,
)
from conveyor._connection import check_policy
from conveyor._scheduler import Scheduler

from bench.servers import start_server


@pytest.mark.parametrize("batch_enqueue", [True, False])
def test_an_async_queue_used_after_its_loop_closed_refuses_every_call_and_sends_nothing(
    redis_url, queue_name, batch_enqueue
):
    """AsyncQueue's docstring: "Used after that loop closed, a call raises a ConveyorError saying
    so." Failed before: every other call ran (its connection of the closed loop was dropped, the
    next one made on the new loop), and a write that raised had been applied: enqueue() raised
    that ConveyorError after the server ran the script, so the job existed (ids 2 and 4 of four
    calls), and a caller who enqueued again on the error made a duplicate."""
    q = AsyncQueue.from_url(redis_url, queue_name, batch_enqueue=batch_enqueue)
    asyncio.run(q.enqueue("t", 1))
    calls = [lambda: q.enqueue("t", 2), lambda: q.enqueue_many([("t", 3)]), q.counts,
             lambda: q.get_job("1"), lambda: q.jobs("waiting"), lambda: q.cancel("1")]  # fmt: skip
    for call in calls * 2:
        with pytest.raises(ConveyorError, match="belongs to the event loop it first ran on"):
            asyncio.run(call())
    sync = Queue.from_url(redis_url, queue_name)
    assert [(job.id, job.payload) for job in sync.jobs("waiting")] == [("1", 1)]
    sync.close()


async def test_a_job_of_a_task_the_worker_does_not_know_is_retried_then_fails_naming_it(api):
    """production.md: such a job fails each attempt with an error naming the task and is retried
    with backoff while attempts remain (the page said only that it fails)."""
    q = api.queue(keep_failed=-1, backoff=Backoff(base=0.01, cap=0.01), maintenance_interval=0.05)
    job = await q.enqueue("unknown-task", None, max_attempts=2)
    api.worker(q, {"known": api.handler()})
    await wait_until(lambda: _state(q, job.id, "failed"), timeout=10, what="the job to fail")
    failed = await q.get_job(job.id)
    assert failed.attempts == 2
    assert "no handler is registered for task 'unknown-task'" in failed.error


async def _state(q, job_id: str, state: str) -> bool:
    return (await q.get_job(job_id)).state == state


def test_the_scheduler_uses_at_most_two_connections_per_queue(server, queue_name):
    """production.md (Connections): the scheduler's share of a worker's connections. The page said
    one per queue with schedules; its reads go through the queue's pool while its script calls
    keep a connection of that pool, so a queue's schedules use two."""
    admin = server.client()
    before = {client["id"] for client in admin.client_list()}
    app = Conveyor(server.url)

    @app.task(queue=queue_name)
    def tick() -> None: ...

    app.periodic("a", tick, every=0.01)
    app.periodic("b", tick, every=0.01)
    scheduler = Scheduler(app)
    fired = 0
    for _ in range(4):
        fired += len(scheduler.tick())
        time.sleep(0.02)
    assert fired >= 6
    assert len({client["id"] for client in admin.client_list()} - before) == 2
    app.close()
    admin.close()


async def test_the_dedup_window_keeps_the_id_of_every_cancelled_job(api):
    """production.md (Deduplication window): a job cancelled while it ran keeps its id for the
    window, like a completed or failed one, and so does a job cancel() removed while waiting or
    delayed. It left no id behind: a producer re-sending the enqueue of a job cancelled
    meanwhile (a retry after a timeout) created it again, and it ran though cancelled."""
    q = api.queue(dedup_window=60)
    await q.enqueue("t", 1, job_id="removed")
    await q.enqueue("t", 1, job_id="delayed", delay=60)
    assert await q.cancel("removed") and await q.cancel("delayed")
    for job_id in ("removed", "delayed"):
        again = await q.enqueue("t", 2, job_id=job_id)
        assert (again.created, again.state) == (False, "finished")
    assert await q.counts() == counts()
    await q.enqueue("t", 1, job_id="running")
    [job] = await q.claim()
    assert await q.cancel("running")
    await q.extend(job)
    assert await q.fail(job, "stopped") == "cancelled"
    again = await q.enqueue("t", 2, job_id="running")
    assert (again.created, again.state) == (False, "cancelled")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+cluster://u:secret@n1:6379,n2:6380", "redis+cluster://n1:6379,n2:6380"),
        ("rediss+sentinel://:secret@s1:26379,[::1]:26380/mymaster/2",
         "rediss+sentinel://s1:26379,[::1]:26380/mymaster/2"),
        ("rediss://h:6380/0?ssl_password=secret&ssl_keyfile=/k.pem",
         "rediss://h:6380/0?ssl_password=***&ssl_keyfile=/k.pem"),
        ("redis://u:pa/secret@h:6379/0", "redis://h:6379/0"),  # an unencoded '/' in the password
    ],
)  # fmt: skip
def test_redact_url_hides_the_credentials_of_every_url_conveyor_takes(url, expected):
    """redact_url's docstring: the URL without user name, password or credential query
    parameters, safe to print or store. Failed before: a Cluster or Sentinel URL of several
    hosts with credentials raised ValueError (urllib read '6379,n2:6380' as its port) or lost
    all hosts but the last, ssl_password (the key file's password, an option of rediss URLs) was
    left in, and a password with an unencoded '/' raised ValueError."""
    redacted = redact_url(url)
    assert redacted == expected
    assert "secret" not in redacted


async def test_an_empty_batch_enqueues_nothing_instead_of_failing_the_call(api):
    """enqueue_many: "up to 1000 jobs"; enqueue_many_to: "up to 1000 specs each", and the
    high-availability page fills queues with one batch per queue from data (a queue with nothing
    to send this time gets an empty batch). Failed before: an empty batch raised ValueError ("a
    batch holds 1..1000 jobs, got 0"), and for enqueue_many_to it failed the whole call, the other
    queues' jobs unsent."""
    q = api.queue()
    other = f"{api.name}-other"
    before = api.all_keys()
    assert await q.enqueue_many([]) == []
    assert await q.enqueue_many_to({api.name: [], other: iter([])}) == {api.name: [], other: []}
    assert api.all_keys() <= before  # nothing was sent
    sent = await q.enqueue_many_to({api.name: [("t", 1)], other: []})
    assert [job.payload for job in sent[api.name]] == [1] and sent[other] == []
    assert (await q.counts())["waiting"] == 1


def test_a_task_enqueued_from_asyncio_works_from_every_event_loop(redis_url, queue_name):
    """production.md: "Enqueue from anywhere that imports the app", ``await task.aenqueue()`` in
    asyncio code. The app kept one AsyncQueue per queue, bound to the first loop that used it:
    from a second asyncio.run() every other call raised (and some raised after their job was
    written), and with AsyncQueue refusing other loops, every call did. The app now keeps its
    asyncio clients per event loop."""
    app = Conveyor(redis_url)

    @app.task(queue=queue_name)
    async def work(n: int) -> None: ...

    async def enqueue_and_close(n: int) -> bool:
        job = await work.aenqueue(n)
        if n % 2:  # the app's clients of this loop, closed before it ends (as the Runner does)
            await app.aclose()
        return job.created

    assert all(asyncio.run(enqueue_and_close(n)) for n in range(4))
    assert app.queue(queue_name).counts()["waiting"] == 4
    app.close()


async def test_a_jobs_token_after_ack_fail_and_release(api):
    """Job's docstring: an ack or a fail clears the token and sets the state; after a release the
    token stays, refused by the server from then on (the docstring said the token is set only
    while this client holds the lease)."""
    q = api.queue(backoff=Backoff(base=60, cap=60))
    await q.enqueue_many([("t", 1), ("t", 2), ("t", 3)])
    acked, failed, released = await q.claim(count=3)
    await q.ack(acked)
    assert await q.fail(failed, "boom") == "retry"
    assert [(job.token, job.state) for job in (acked, failed)] == [(None, "completed"), (None, "delayed")]
    assert await q.release([released]) == [1]
    assert released.token is not None
    with pytest.raises(LeaseLostError):
        await q.ack(released)
    with pytest.raises(LeaseLostError):
        await q.extend(released)
    assert (await q.counts())["waiting"] == 1


@pytest.mark.parametrize(
    ("policy", "says"),
    [("allkeys-lru", "evict queued jobs"), ("volatile-ttl", "a rate Limit's next start")],
)
def test_the_eviction_warning_names_what_the_policy_can_evict(policy, says):
    """tuning.md (maxmemory-policy): the allkeys-* policies can evict jobs, the volatile-* ones
    only keys with an expiry, which no job has. Failed before: the warning (and strict mode's
    ServerConfigError) said any policy but noeviction 'can silently evict queued jobs'."""
    with pytest.raises(ServerConfigError) as refused:
        check_policy(QueueSettings(strict=True), {"maxmemory_policy": policy})
    assert says in str(refused.value) and "noeviction" in str(refused.value)
    if policy.startswith("volatile"):
        assert "queued jobs" not in str(refused.value)


async def test_extend_past_the_time_limit_raises_lease_lost_and_recovery_times_the_job_out(api):
    """Queue.extend's docstring: past its time limit the lease is not renewed (LeaseLostError);
    production.md (Time limits, "If the worker died"): once the lease runs out, lease recovery
    settles the attempt as timed out, retried while attempts remain, with the limit's error text
    plus the attempt number."""
    q = api.queue(lease=0.3, keep_failed=-1, backoff=Backoff(base=0, cap=0))
    job = await q.enqueue("t", 1, time_limit=0.1, max_attempts=2)
    [held] = await q.claim()
    await asyncio.sleep(0.15)
    with pytest.raises(LeaseLostError):
        await q.extend(held)
    await asyncio.sleep(0.3)
    assert await q.recover() == (1, 0)
    again = await q.get_job(job.id)
    assert again.state == "waiting" and again.attempts == 1
    [held] = await q.claim()
    await asyncio.sleep(0.35)
    assert await q.recover() == (0, 1)
    failed = await q.get_job(job.id)
    assert failed.state == "failed"
    assert failed.error == "timed out: the attempt exceeded its time limit of 0.1 s after attempt 2 of 2"


@pytest.mark.parametrize(
    "url",
    [
        "redis://h:6379/0?password=secret&no_such_option=1",
        "redis://h:6379/abc?password=secret",
        "redis+cluster://h:1/1?password=secret",
        "rediss://h:6380/0?ssl_password=secret&protocol=4",
        "redis+sentinel://s:26379?password=secret",
        "redis://user:secret@h:6379/x",
    ],
)
def test_a_refused_url_is_named_without_its_credentials(url):
    """production.md: "errors name the server's address, never the credentials in its URL".
    Failed before: a URL refused for another reason (an unknown option, a database that is not a
    number, a bad protocol, no Sentinel service) was quoted with its password=... option."""
    with pytest.raises(ValueError) as refused:
        Conveyor(url)
    assert "secret" not in str(refused.value)


async def _claim_order(q, n: int) -> list[str]:
    return [job.id for job in await q.claim(count=n)]


@pytest.mark.parametrize("how", ["release", "recover", "retry_failed", "retry", "delayed"])
async def test_a_job_put_back_goes_to_the_front_or_back_of_its_level(api, how):
    """production.md (Priorities): released and recovered jobs and jobs given to retry_failed go
    back to the front of their level, a retry after a failure and a delayed job to its back."""
    q = api.queue(lease=0.2, keep_failed=-1, backoff=Backoff(base=0, cap=0))
    if how == "delayed":
        first = await q.enqueue("t", 0, priority=5, delay=0.05)
        others = await q.enqueue_many([JobSpec("t", i, priority=5) for i in (1, 2)])
        await asyncio.sleep(0.1)
        assert await _claim_order(q, 3) == [others[0].id, others[1].id, first.id]
        return
    jobs = await q.enqueue_many([JobSpec("t", i, priority=5, max_attempts=2) for i in range(3)])
    [held] = await q.claim()
    assert held.id == jobs[0].id
    if how == "release":
        await q.release([held])
    elif how == "recover":
        await asyncio.sleep(0.3)
        assert await q.recover() == (1, 0)
    elif how == "retry_failed":
        assert await q.fail(held, "boom", retry=False) == "failed"
        assert await q.retry_failed([held.id]) == 1
    else:
        assert await q.fail(held, "boom") == "retry"
    front = how != "retry"
    expected = [jobs[0].id, jobs[1].id, jobs[2].id] if front else [jobs[1].id, jobs[2].id, jobs[0].id]
    assert await _claim_order(q, 3) == expected


@pytest.mark.parametrize("surface", ["sync", "async"])
def test_a_server_at_maxclients_is_a_connection_failed_error(server, queue_name, surface):
    """connections.md (When the pool is exhausted): past the server's maxclients, new
    connections get 'ERR max number of clients reached', raised as a ConnectionFailedError."""
    if server.family == "dragonfly":
        pytest.skip("Dragonfly's maxclients is a start flag")
    with start_server(server.kind) as own:
        admin = own.client()
        admin.config_set("maxclients", len(admin.client_list()))
        with pytest.raises(ConnectionFailedError, match="max number of clients reached"):
            if surface == "sync":
                Queue.from_url(own.url, queue_name).enqueue("t", 1)
            else:
                asyncio.run(AsyncQueue.from_url(own.url, queue_name).enqueue("t", 1))
        admin.close()
