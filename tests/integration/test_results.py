"""Job results: stored at ack in the same script call (one results hash and one expiry set per
queue, a record starting with its expiry, and one index entry per call), waited for without
polling (one blocking XREAD per client and queue), kept for result_ttl (hidden at read time once
expired, deleted by trim) and removed with their job by retention."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    wait_until,
)
from conveyor import (
    ConveyorError,
    JobCancelledError,
    JobFailedError,
    PayloadTooLargeError,
    Queue,
    QueueSettings,
)


def _result(api, job, timeout=10.0):
    """job.result() on either surface, as an awaitable."""
    if api.is_async:
        return job.result(timeout)
    return asyncio.to_thread(job.result, timeout)


def _readers(api) -> int:
    """Connections blocked in XREAD on this server (the result readers; flag b: blocked now, as
    glide's reader keeps its own connection, whose last command stays XREAD)."""
    return sum(1 for c in api.admin.client_list() if c.get("cmd") == "xread" and "b" in c.get("flags", ""))


def _waiting(q) -> int:
    return len(q.inner._results.registry.waiting)


async def test_round_trip_and_waiter_on_an_already_finished_job(api):
    q = api.queue(store_results=True)
    api.worker(q, {"add": api.handler(lambda job: {"sum": sum(job.payload)})}, concurrency=2)
    job = await q.enqueue("add", [1, 2, 3])
    assert await _result(api, job) == {"sum": 6}
    # Finished and its record deleted at ack (keep_completed 0): the result is still there.
    assert await q.get_job(job.id) is None
    assert await q.result(job.id, 0) == {"sum": 6}
    none_job = await q.enqueue("add", [])
    assert await _result(api, none_job) == {"sum": 0}


async def test_waiter_started_before_the_job_is_claimed(api):
    q = api.queue(store_results=True)
    job = await q.enqueue("echo", "hello")
    waiter = asyncio.ensure_future(_result(api, job))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    await wait_until(lambda: _readers(api) >= 1, what="the reader to block")
    assert not waiter.done()
    api.worker(q, {"echo": api.handler(lambda job: job.payload.upper())})
    assert await asyncio.wait_for(waiter, 10) == "HELLO"


async def test_many_waiters_share_one_blocking_reader(api):
    q = api.queue(store_results=True)
    jobs = await q.enqueue_many([("sq", i) for i in range(20)])
    await wait_until(lambda: _readers(api) == 0, what="earlier readers to end")
    results: dict[str, object] = {}
    if api.is_async:
        waiters = [asyncio.ensure_future(job.result(10)) for job in jobs]
    else:  # real threads: to_thread's pool is smaller than 20 on a small machine
        threads = [threading.Thread(target=lambda j=j: results.update({j.id: j.result(10)}))
                   for j in jobs]
        for t in threads:
            t.start()
    await wait_until(lambda: _waiting(q) == 20, what="20 waiters to register")
    await wait_until(lambda: _readers(api) == 1, what="the reader to block")
    await asyncio.sleep(0.1)
    assert _readers(api) == 1
    api.worker(q, {"sq": api.handler(lambda job: job.payload ** 2)}, concurrency=4)
    if api.is_async:
        values = await asyncio.wait_for(asyncio.gather(*waiters), 15)
    else:
        await asyncio.to_thread(lambda: [t.join(15) for t in threads])
        values = [results[j.id] for j in jobs]
    assert values == [i * i for i in range(20)]
    await wait_until(lambda: _readers(api) == 0, what="the idle reader to end")


async def test_failure_reraises_with_error_and_attempts(api):
    q = api.queue(store_results=True, max_attempts=1)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(_result(api, job))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    [leased] = await q.claim()
    await q.fail(leased, "ValueError: bad input", retry=False)
    with pytest.raises(JobFailedError) as caught:
        await asyncio.wait_for(waiter, 10)
    assert (caught.value.error, caught.value.attempts, caught.value.state) == (
        "ValueError: bad input", 1, "failed")
    assert "bad input" in str(caught.value)


async def test_cancelling_a_waiting_job_ends_its_waiters(api):
    """A job cancelled before it ran is deleted; with results on, its waiters learn at once
    (a cancelled record and an event) instead of waiting until their timeout."""
    q = api.queue(store_results=True)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(_result(api, job, 30))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    assert await q.cancel(job.id)
    with pytest.raises(JobCancelledError, match="cancelled before it ran") as caught:
        await asyncio.wait_for(waiter, 10)
    assert caught.value.state == "cancelled"
    with pytest.raises(JobCancelledError):
        await q.result(job.id, 0)  # and later callers too, for result_ttl


async def test_lease_expiry_failure_reaches_waiters(api):
    q = api.queue(store_results=True, max_attempts=1)
    job = await q.enqueue("t", None)
    await q.claim(1, 0.05)
    await asyncio.sleep(0.1)
    assert await q.recover() == (0, 1)
    with pytest.raises(JobFailedError, match="lease expired after attempt 1 of 1"):
        await _result(api, job)


async def test_result_over_the_cap_fails_the_job_without_retry(api):
    q = api.queue(store_results=True, max_result_bytes=50, max_attempts=3)
    api.worker(q, {"big": api.handler(lambda job: "x" * 100)})
    job = await q.enqueue("big", None)
    with pytest.raises(JobFailedError, match="max_result_bytes") as caught:
        await _result(api, job)
    assert caught.value.attempts == 1  # a rerun would fail the same way
    assert "the limit is 50 bytes" in caught.value.error
    with pytest.raises(PayloadTooLargeError, match="max_result_bytes"):
        await q.ack(job, result="y" * 100)  # checked before anything is sent


async def test_timeout_raises_and_leaves_no_waiter(api):
    q = api.queue(store_results=True)
    job = await q.enqueue("t", None)
    with pytest.raises(TimeoutError, match=f"job '{job.id}' did not finish within 0.2 s"):
        await _result(api, job, 0.2)
    assert _waiting(q) == 0


async def test_result_ttl_expiry(api):
    q = api.queue(store_results=True, result_ttl=0.3)
    await q.enqueue("t", None, job_id="ttl-1")
    [job] = await q.claim()
    await q.ack(job, result=[1, 2])
    assert await q.result("ttl-1", 1) == [1, 2]
    seconds, micros = api.admin.time()
    expires = int(re.match(rb"\d+", api.admin.hget(q.keys.results, "ttl-1")).group())
    assert 0 < expires - (seconds * 1000 + micros / 1000) <= 300
    await asyncio.sleep(0.4)
    # Expired but not yet trimmed: still stored, no longer readable (checked at read time).
    assert api.admin.hexists(q.keys.results, "ttl-1")
    with pytest.raises(ConveyorError, match=r"no stored result .*result_ttl"):
        await q.result("ttl-1", 1)
    assert await q.trim() == 0  # counts removed jobs; expired records go too
    assert not api.admin.hexists(q.keys.results, "ttl-1")
    assert api.admin.llen(q.keys.result_index) == 0


def test_trim_removes_expired_results_in_bounded_batches(server, queue_name):
    """Five expired records (five index entries), trim batch 2: three calls delete them, and an
    unexpired record stays."""
    q = Queue.from_url(server.url, queue_name, store_results=True, result_ttl=0.05)
    keep = Queue.from_url(server.url, queue_name, store_results=True, maintenance_batch=2)
    try:
        q.enqueue_many([("t", None)] * 5)
        for job in q.claim(5):
            q.ack(job, result=job.id)
        keep.enqueue("t", None, job_id="kept")
        keep.ack(keep.claim()[0], result="kept")
        threading.Event().wait(0.1)
        assert q.client.hlen(q.core.keys.results) == 6
        assert [keep.trim(), q.client.hlen(q.core.keys.results)] == [0, 4]
        keep.trim()
        keep.trim()
        assert q.client.hkeys(q.core.keys.results) == [b"kept"]
        assert q.client.llen(q.core.keys.result_index) == 1
        assert keep.result("kept", 0) == "kept"
    finally:
        q.close()
        keep.close()


def test_an_expired_index_entry_keeps_a_newer_record_of_the_same_job(server, queue_name):
    """A job failed with a short result TTL, was retried and then completed with a long one: when
    trim sweeps the first (expired) index entry, the job's newer record stays."""
    short = Queue.from_url(server.url, queue_name, store_results=True, result_ttl=0.05, max_attempts=1)
    long = Queue.from_url(server.url, queue_name, store_results=True)
    try:
        short.enqueue("t", None, job_id="again")
        short.fail(short.claim()[0], "boom", retry=False)
        assert long.retry_failed(["again"]) == 1
        long.ack(long.claim()[0], result="second")
        threading.Event().wait(0.1)
        assert long.client.llen(long.core.keys.result_index) == 2
        long.trim()
        assert long.client.llen(long.core.keys.result_index) == 1  # the expired entry went
        assert long.result("again", 0) == "second"
    finally:
        short.close()
        long.close()


def test_one_batched_ack_stores_every_result(server, queue_name):
    """A worker acks several jobs per call: each gets its own record, the call one index entry,
    and each waiter its result."""
    q = Queue.from_url(server.url, queue_name, store_results=True)
    try:
        q.enqueue_many([("t", i) for i in range(5)])
        jobs = q.claim(5)
        statuses, _, _ = q._run(q.core.ack(jobs, results=[b'c:"v%d"' % j.payload for j in jobs]))
        assert statuses == [1] * 5
        assert q.client.hlen(q.core.keys.results) == 5
        assert q.client.llen(q.core.keys.result_index) == 1
        # one event entry for the call, with one field naming every id (not a field per job)
        [(_, fields)] = q.client.xrange(q.core.keys.events)
        assert fields == {b"{c": "{".join(j.id for j in jobs).encode()}
        assert [q.result(j.id, 0) for j in jobs] == [f"v{j.payload}" for j in jobs]
    finally:
        q.close()


def test_results_stored_by_the_previous_layout_stay_readable(server, queue_name):
    """0.1 stored each record as a string key expiring on its own; those are still read (until
    their TTL), and a record in the results hash takes precedence."""
    q = Queue.from_url(server.url, queue_name, store_results=True)
    try:
        keys = q.core.keys
        q.client.set(keys.legacy_result("old-ok"), b'c:{"a": 1}', px=60_000)
        q.client.set(keys.legacy_result("old-failed"), b"f2:ValueError: boom", px=60_000)
        q.client.set(keys.legacy_result("old-gone"), b"c:1", px=1)
        assert q.result("old-ok", 0) == {"a": 1}
        with pytest.raises(JobFailedError) as caught:
            q.result("old-failed", 0)
        assert (caught.value.error, caught.value.attempts) == ("ValueError: boom", 2)
        threading.Event().wait(0.01)
        with pytest.raises(ConveyorError, match="no stored result"):
            q.result("old-gone", 0)
    finally:
        q.close()


async def test_results_follow_retention(api):
    q = api.queue(store_results=True, keep_completed=1)
    for job_id in ("old", "new"):
        await q.enqueue("t", None, job_id=job_id)
        [job] = await q.claim()
        await asyncio.sleep(0.005)  # finish times in different ms: a tie is trimmed by name
        await q.ack(job, result=job_id)
    assert await q.result("new", 1) == "new"
    with pytest.raises(ConveyorError, match="no stored result"):
        await q.result("old", 1)  # trimmed with its job
    assert not api.admin.hexists(q.keys.results, "old")
    by_age = api.queue(store_results=True, keep_completed=-1, completed_max_age=0.001)
    await asyncio.sleep(0.01)
    assert await by_age.trim() == 1
    assert api.admin.hlen(q.keys.results) == 0


async def test_purged_failed_jobs_take_their_results(api):
    q = api.queue(store_results=True, keep_failed=-1, max_attempts=1)
    for job_id in ("purged", "kept"):
        await q.enqueue("t", None, job_id=job_id)
        [job] = await q.claim()
        await q.fail(job, "boom", retry=False)
    assert await q.purge_failed(["purged"]) == 1
    with pytest.raises(ConveyorError, match="no stored result"):
        await q.result("purged", 0)
    assert not api.admin.hexists(q.keys.results, "purged")
    with pytest.raises(JobFailedError, match="boom"):
        await q.result("kept", 0)


async def test_results_off_writes_nothing_and_says_so(api):
    q = api.queue()
    job = await q.enqueue("t", None)
    [leased] = await q.claim()
    await q.ack(leased)
    keys = api.queue_keys()
    assert not [k for k in keys if k.endswith((b":ev", b":rs", b":ri")) or b":r:" in k]
    with pytest.raises(ConveyorError, match="store_results=True"):
        await _result(api, job)


def test_settings_validation():
    with pytest.raises(ValueError, match=r"result_ttl must be a finite .* >= 0\.001 \(a result expires"):
        QueueSettings(result_ttl=0)
    with pytest.raises(ValueError, match=r"max_result_bytes must be an int >= 1, got 0"):
        QueueSettings(max_result_bytes=0)


def test_events_stream_stays_capped(server, queue_name):
    """1,500 ack calls announce 1,500 entries; the stream keeps about 1,000 (MAXLEN ~)."""
    q = Queue.from_url(server.url, queue_name, store_results=True)
    try:
        q.enqueue_many([("t", None)] * 1000)
        q.enqueue_many([("t", None)] * 500)
        jobs = q.claim(1000) + q.claim(500)
        q.client.script_load(q.core.ack([]).script.source)
        pipe = q.client.pipeline(transaction=False)
        for job in jobs:  # one call per job: one stream entry each
            call = q.core.ack([job])
            pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        assert all(reply[0] == 1 for reply in pipe.execute())
        assert 1000 <= q.client.xlen(q.core.keys.events) <= 1100
        assert q.result(jobs[-1].id, 0) is None
    finally:
        q.close()


async def test_closing_the_queue_ends_its_waiters(api):
    q = api.queue(store_results=True)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(_result(api, job, None))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    await q.close()
    with pytest.raises(ConveyorError, match="was closed while waiting"):
        await asyncio.wait_for(waiter, 5)


async def test_a_waiter_whose_event_was_trimmed_while_its_reader_was_away_gets_its_result(api, monkeypatch):
    """The reader's connection is cut; while it waits to reconnect, the job finishes and 1,500
    more events (other clients' jobs) push the capped stream (MAXLEN ~ 1000) past its position.
    Before, the waiter timed out though its result was stored all along."""
    from conveyor import Backoff  # noqa: PLC0415

    monkeypatch.setattr("conveyor._result_wait.RECONNECT", Backoff(base=1.0, cap=1.0, jitter=0.0))
    waiter_q = api.queue(store_results=True)
    worker_q = api.queue(name=waiter_q.name, store_results=True)
    target = await worker_q.enqueue("render", {"id": 42})
    [job] = await worker_q.claim(1)
    waiting = asyncio.ensure_future(waiter_q.result(target.id, timeout=8))
    await wait_until(lambda: _readers(api) == 1, timeout=5, what="the result reader to block")
    [reader] = [c for c in api.admin.client_list() if c.get("cmd") == "xread"]
    api.admin.client_kill_filter(_id=reader["id"])
    await worker_q.ack(job, result={"pages": 3})
    flood = "for i = 1, 1500 do redis.call('XADD', KEYS[1], 'MAXLEN', '~', 1000, '*', '{c', 'x' .. i) end"
    api.admin.eval(flood, 1, waiter_q.keys.events)
    assert await waiting == {"pages": 3}


async def test_a_retried_failed_job_is_waited_for_not_answered_with_its_old_failure(api):
    """A failed job given a fresh start by retry_failed() still has its old failure record. The
    waiter's probe saw the job waiting and waited; but a full read of the events stream (the
    reader behind: here 600 events of other jobs in one go) reads the record of every job
    waited for, and settled the waiter with that old failure while the job had not run again."""
    q = api.queue(store_results=True, keep_failed=-1, max_attempts=1)
    job = await q.enqueue("t", None, job_id="retried")
    [leased] = await q.claim()
    await q.fail(leased, "ValueError: first run", retry=False)
    assert await q.retry_failed(["retried"]) == 1
    waiter = asyncio.ensure_future(_result(api, job, 30))
    await wait_until(lambda: _readers(api) == 1, timeout=5, what="the result reader to block")
    flood = "for i = 1, 600 do redis.call('XADD', KEYS[1], '*', '{c', 'other-' .. i) end"
    api.admin.eval(flood, 1, q.keys.events)
    await asyncio.sleep(0.5)  # the reader's full read and its records call
    assert not waiter.done(), waiter.exception()  # still waiting: the job has not run again
    [again] = await q.claim()
    assert (again.id, again.attempts) == ("retried", 1)
    await q.ack(again, result="second run")
    assert await asyncio.wait_for(waiter, 10) == "second run"


async def test_a_timeout_too_long_for_a_thread_wait_still_waits(api):
    """check_wait accepts any timeout >= 0, inf included; the sync waiter handed it to
    threading.Event.wait, which raises OverflowError past threading.TIMEOUT_MAX (about 292
    years): result(timeout=float('inf')) or 1e10 failed where the async twin waited."""
    q = api.queue(store_results=True)
    for timeout in (float("inf"), 1e10):
        job = await q.enqueue("t", None)
        waiter = asyncio.ensure_future(_result(api, job, timeout))
        await wait_until(lambda: _waiting(q) == 1 or waiter.done(), what="the waiter to register")
        assert not waiter.done(), waiter.exception()
        [leased] = await q.claim()
        await q.ack(leased, result=str(timeout))
        assert await asyncio.wait_for(waiter, 10) == str(timeout)


async def test_a_waiter_learns_when_its_job_finished_without_storing_a_result(api):
    """Workers whose queue has store_results off finish the job without a record or an event. The
    waiter must say so once the stream has been idle for a read, not wait for ever (before, a
    waiter without a timeout never returned)."""
    q = api.queue(store_results=True)
    workers_queue = api.queue(store_results=False)
    job = await q.enqueue("t", None)
    waiter = asyncio.ensure_future(_result(api, job, 30))
    await wait_until(lambda: _waiting(q) == 1, what="the waiter to register")
    [claimed] = await workers_queue.claim()
    await workers_queue.ack(claimed, result="lost")
    with pytest.raises(ConveyorError, match=f"job '{job.id}' has no stored result"):
        await asyncio.wait_for(waiter, 10)
    assert _waiting(q) == 0


async def test_a_job_cancelled_while_waiting_to_retry_is_not_said_never_to_have_run(api):
    """A job that failed an attempt and waits for its retry has run: its cancelled record says
    it was cancelled between attempts, with the attempts it had (before: 'before it ran')."""
    q = api.queue(store_results=True, max_attempts=3)
    job = await q.enqueue("t", None)
    [claimed] = await q.claim()
    await q.fail(claimed, "boom")
    assert await q.cancel(job.id)
    with pytest.raises(JobCancelledError, match="cancelled while waiting for its next attempt") as caught:
        await q.result(job.id, 0)
    assert caught.value.attempts == 1
