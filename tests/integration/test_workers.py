"""Workers on real servers, each body run with Worker (threads) and AsyncWorker (tasks)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from _support import (
    client_command as _command,
)
from conveyor import Backoff, ConnectionFailedError


def _names(api, q) -> list[tuple[str, str]]:
    """(role, current command) of every connection named after this queue. Dragonfly's CLIENT
    LIST has no cmd= field; a client blocked there shows flags=b, read here as "bzpopmin" (the
    only blocking command Conveyor sends)."""
    prefix = f"conveyor:{q.name}:"
    return sorted(
        (c["name"][len(prefix):], _command(c))
        for c in api.admin.client_list()
        if c.get("name", "").startswith(prefix)
    )


async def _completed(q, n: int) -> bool:
    return (await q.counts())["total_completed"] >= n


async def test_worker_processes_retries_and_fails_jobs(api):
    q = api.queue(max_attempts=2, backoff=Backoff(base=0.05, cap=0.1), keep_failed=-1,
                  maintenance_interval=0.1)
    seen: list[tuple[str, int]] = []

    def work(job):
        seen.append((job.id, job.attempts))
        if job.payload == 7:
            raise ValueError(f"bad {job.payload}")

    w = api.worker(q, {"work": api.handler(work)}, concurrency=3)
    jobs = await q.enqueue_many([("work", i) for i in range(10)])
    orphan = await q.enqueue("unknown-task", None, max_attempts=1)
    await wait_until(lambda: _settled(q, 9, 2), timeout=10, what="10 jobs settled")
    w.check_alive()
    assert await q.counts() == counts(failed=2, total_completed=9, total_failed=2)
    bad = await q.get_job(jobs[7].id)
    assert bad.state == "failed"
    assert bad.attempts == 2
    assert "ValueError: bad 7" in bad.error
    assert sorted(a for i, a in seen if i == jobs[7].id) == [1, 2]
    assert sorted(i for i, a in seen if a == 1) == sorted(j.id for j in jobs)  # each ran once
    assert "no handler is registered for task 'unknown-task'" in (await q.get_job(orphan.id)).error
    w.stop()
    stats = await w.join(10)
    assert stats["processed"] == 9
    assert stats["failed"] == 3  # two attempts of job 7, one of the orphan


async def _settled(q, completed: int, failed: int) -> bool:
    c = await q.counts()
    return c["total_completed"] >= completed and c["total_failed"] >= failed


async def test_undecodable_payload_fails_without_retry(api):
    q = api.queue(max_attempts=3)
    job = await q.enqueue("work", {"ok": True})
    api.admin.hset(q.keys.job(job.id), "d", b"\x80 not json")
    ran: list[str] = []
    w = api.worker(q, {"work": api.handler(lambda j: ran.append(j.id))})
    await wait_until(lambda: _settled(q, 0, 1), timeout=10, what="the job to fail")
    w.check_alive()
    stored = await q.get_job(job.id)
    assert stored.state == "failed"
    assert stored.attempts == 1  # a payload that cannot be decoded is not retried
    assert "cannot be decoded" in stored.error
    assert ran == []


async def test_burst_worker_drains_and_returns(api):
    q = api.queue()
    await q.enqueue_many([("work", i) for i in range(20)])
    done: list[int] = []
    w = api.worker(q, {"work": api.handler(lambda j: done.append(j.payload))}, concurrency=4, burst=True)
    stats = await w.join(15)
    assert stats["processed"] == 20
    assert sorted(done) == list(range(20))
    assert await q.counts() == counts(total_completed=20)


async def test_heartbeat_keeps_a_long_job_leased(api):
    q = api.queue(lease=0.3, keep_completed=-1, maintenance_interval=0.1)
    runs: list[str] = []
    w = api.worker(q, {"slow": api.handler(lambda j: runs.append(j.id), sleep=1.0)}, concurrency=2)
    job = await q.enqueue("slow", None)
    await wait_until(lambda: _completed(q, 1), timeout=10, what="the slow job")
    w.check_alive()
    assert runs == [job.id]  # never redelivered although it ran for 3 leases
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts) == ("completed", 1)


async def test_batch_enqueue_wakes_every_idle_worker(api):
    q = api.queue()
    started: list[tuple[int, str, float]] = []
    workers = []
    for i in range(4):
        def mark(job, i=i):
            started.append((i, job.id, time.monotonic()))
        workers.append(api.worker(q, {"nap": api.handler(start=mark, sleep=0.5)},
                                  concurrency=1, prefetch=0, block_timeout=3.0))
    await wait_until(lambda: _names(api, q).count(("waiter", "bzpopmin")) == 4, timeout=10,
                     what="4 idle workers blocked on the marker")
    t0 = time.monotonic()
    await q.enqueue_many([("nap", i) for i in range(4)])
    await wait_until(lambda: _completed(q, 4), timeout=5, interval=0.01, what="4 naps")
    elapsed = time.monotonic() - t0
    assert elapsed < 1.2, f"4 naps of 0.5 s took {elapsed:.2f} s: not all workers woke"
    assert len({i for i, _, _ in started}) == 4, f"jobs ran on workers {started}"
    assert max(t for *_, t in started) - min(t for *_, t in started) < 0.4
    for w in workers:
        w.check_alive()


async def test_connections_by_role(api):
    q = api.queue(maintenance_interval=0.1)
    workers = [api.worker(q, {"t": api.handler()}, concurrency=4) for _ in range(2)]
    await q.enqueue("t", 1)
    expected = [("maint", ""), ("maint", ""), ("pump", ""), ("pump", ""), ("waiter", ""), ("waiter", "")]
    await wait_until(lambda: [(r, "") for r, _ in _names(api, q)] == expected, timeout=10,
                     what="3 named connections per worker")
    await wait_until(lambda: _names(api, q).count(("waiter", "bzpopmin")) == 2, timeout=10,
                     what="both waiters blocked in BZPOPMIN")
    for w in workers:
        w.check_alive()
    api.stop_workers(workers)
    for w in workers:
        await w.join(10)
    await wait_until(lambda: _names(api, q) == [], timeout=5, what="worker connections closed")


async def test_graceful_shutdown_finishes_the_running_job(api):
    q = api.queue(keep_completed=-1)
    started: list[str] = []
    w = api.worker(q, {"nap": api.handler(start=lambda j: started.append(j.id), sleep=0.5)},
                   shutdown_timeout=3.0)
    job = await q.enqueue("nap", None)
    await wait_until(lambda: started == [job.id], timeout=10, what="the handler to start")
    t0 = time.monotonic()
    w.stop()
    stats = await w.join(5)
    assert time.monotonic() - t0 < 2.0
    assert stats["processed"] == 1
    assert await q.counts() == counts(completed=1, total_completed=1)
    assert (await q.get_job(job.id)).state == "completed"


async def test_graceful_shutdown_releases_what_it_cannot_finish(api):
    q = api.queue()
    started: list[str] = []
    w = api.worker(q, {"nap": api.handler(start=lambda j: started.append(j.id), sleep=3.0)},
                   concurrency=1, prefetch=1, shutdown_timeout=0.3)
    running, buffered = await q.enqueue_many([("nap", 1), ("nap", 2)])
    await wait_until(lambda: started == [running.id], timeout=10, what="the handler to start")
    await wait_until(lambda: _counts_are(q, active=2), timeout=5, what="the prefetched lease")
    t0 = time.monotonic()
    w.stop()
    stats = await w.join(5)
    assert time.monotonic() - t0 < 1.5  # shutdown_timeout plus one pump tick
    assert stats["processed"] == 0
    first = await q.get_job(running.id)
    second = await q.get_job(buffered.id)
    if api.is_async:  # the handler was cancelled: released, the attempt counts
        assert await q.counts() == counts(waiting=2)
        assert (first.state, first.attempts) == ("waiting", 1)
    else:  # a thread cannot be stopped: its lease is left to expire (never run twice at once)
        assert await q.counts() == counts(waiting=1, active=1)
        assert (first.state, first.attempts) == ("active", 1)
    assert (second.state, second.token, second.attempts) == ("waiting", None, 0)  # refunded


async def _counts_are(q, **expected) -> bool:
    return await q.counts() == counts(**expected)


async def test_script_flush_is_transparent(api):
    q = api.queue(keep_completed=-1)
    steps = []
    for step in ("enqueue", "claim", "extend", "fail", "claim", "ack", "promote", "recover", "trim",
                 "cancel"):
        api.admin.script_flush()
        if step == "enqueue":
            await q.enqueue_many([("t", 1), ("t", 2)])
        elif step == "claim":
            steps.append(await q.claim(lease=5.0))
        elif step == "extend":
            await q.extend(steps[0][0])
        elif step == "fail":
            assert await q.fail(steps[0][0], "again", retry=False) == "failed"
        elif step == "ack":
            await q.ack(steps[1][0])
        elif step == "cancel":
            await q.enqueue("t", 3, job_id="to-cancel")
            api.admin.script_flush()
            assert await q.cancel("to-cancel") is True
        else:
            await getattr(q, step)()
    assert await q.counts() == counts(waiting=0, completed=1, failed=1, total_completed=1,
                                      total_failed=1)


async def test_script_flush_while_a_worker_runs(api):
    q = api.queue()
    done: list[int] = []

    def work(job):
        done.append(job.payload)
        if job.payload == 5:
            api.admin.script_flush()  # mid-batch: the next ack must reload its script

    w = api.worker(q, {"t": api.handler(work)}, concurrency=2)
    await q.enqueue_many([("t", i) for i in range(10)])
    await wait_until(lambda: _completed(q, 10), timeout=10, what="first 10 jobs")
    api.admin.script_flush()  # while the worker is idle
    await q.enqueue_many([("t", i) for i in range(10, 20)])
    await wait_until(lambda: _completed(q, 20), timeout=10, what="20 jobs after SCRIPT FLUSH")
    w.check_alive()
    assert sorted(done) == list(range(20))


async def test_server_restart_while_workers_run(api):
    q = api.queue(lease=2.0, maintenance_interval=0.2)
    done: set[str] = set()
    w = api.worker(q, {"t": api.handler(lambda j: done.add(j.id))}, concurrency=2)
    counter = itertools.count()
    after_restart: list[str] = []
    restarted = False
    stop = asyncio.Event()

    async def producer():
        while not stop.is_set():
            job_id = f"job-{next(counter)}"
            ok = False
            try:
                await q.enqueue("t", None, job_id=job_id)
                ok = True
            except ConnectionFailedError:
                pass  # the server is down right now; the job never existed
            if ok and restarted:
                after_restart.append(job_id)
            await asyncio.sleep(0.03)

    feeder = asyncio.ensure_future(producer())
    await wait_until(lambda: len(done) >= 5, timeout=10, what="jobs before the restart")
    await asyncio.to_thread(api.server.restart)
    restarted = True
    await wait_until(lambda: len(after_restart) >= 10, timeout=20, what="enqueues after restart")
    stop.set()
    await feeder
    w.check_alive()
    await wait_until(lambda: set(after_restart) <= done, timeout=20,
                     what="the worker to process jobs enqueued after the restart")
    w.check_alive()
    # every job enqueued after the restart was acknowledged on the new server (a few enqueued on
    # the new server while restart() was still reading INFO, before `restarted` was set, add to it)
    await wait_until(lambda: _completed(q, len(after_restart)), timeout=5,
                     what="acks of every job enqueued after the restart")
    c = await q.counts()
    assert 0 <= c["total_completed"] - len(after_restart) <= 5, c
    assert (c["waiting"], c["active"], c["delayed"]) == (0, 0, 0)
    w.stop()
    await w.join(10)


async def test_worker_survives_script_flush_during_claim_storm(api):
    """Many small batches while scripts are flushed repeatedly: nothing lost, nothing doubled."""
    q = api.queue()
    done: list[int] = []
    w = api.worker(q, {"t": api.handler(lambda j: done.append(j.payload))}, concurrency=4)
    for batch in range(5):
        await q.enqueue_many([("t", batch * 20 + i) for i in range(20)])
        api.admin.script_flush()
        await asyncio.sleep(0.02)
    await wait_until(lambda: _completed(q, 100), timeout=15, what="100 jobs")
    w.check_alive()
    assert sorted(done) == list(range(100))
    assert await q.counts() == counts(total_completed=100)


async def test_worker_survives_killed_connections(api):
    """CLIENT KILL of every worker connection (a dropped network link): the worker reconnects."""
    q = api.queue(maintenance_interval=0.1)
    done: list[int] = []
    w = api.worker(q, {"t": api.handler(lambda j: done.append(j.payload))}, concurrency=2)
    await q.enqueue_many([("t", i) for i in range(5)])
    await wait_until(lambda: len(done) == 5, timeout=10, what="5 jobs")
    await wait_until(lambda: len(_names(api, q)) == 3, timeout=10, what="3 worker connections")
    prefix = f"conveyor:{q.name}:"
    for c in api.admin.client_list():
        if c.get("name", "").startswith(prefix):
            api.admin.client_kill_filter(_id=c["id"])
    await q.enqueue_many([("t", i) for i in range(5, 10)])
    await wait_until(lambda: len(done) == 10, timeout=15, what="5 jobs after the connections died")
    w.check_alive()
    assert sorted(done) == list(range(10))
    # (the last handler may have returned with its ack still on the way)
    await wait_until(lambda: _counts_are(q, total_completed=10), timeout=10, what="the last ack")


async def test_stop_is_prompt_while_maintenance_runs(api):
    """stop() ends run() promptly even when it lands in the middle of a maintenance call.

    Each cycle starts a worker whose maintenance runs constantly, stops it after a short random
    time, and requires run() to return within 3 s (nothing is leased, so nothing to wait for).
    """
    q = api.queue(maintenance_interval=0.01)
    rng = random.Random(5)
    for cycle in range(15):
        w = api.worker(q, {"t": api.handler()}, concurrency=2)
        await asyncio.sleep(rng.uniform(0.02, 0.1))
        w.check_alive()
        t0 = time.monotonic()
        w.stop()
        try:
            await w.join(3)
        except AssertionError as exc:
            raise AssertionError(f"cycle {cycle}: {exc}") from None
        assert time.monotonic() - t0 < 3


async def test_stop_ends_an_idle_wait_at_once(api):
    """An idle worker blocked in BZPOPMIN (block_timeout 5 s) returns from run() well before
    the block would end: neither waits for the block (the sync Worker's pump waits on an event and
    closes the waiter's socket at the end; no CLIENT UNBLOCK, which Dragonfly lacks); the async
    one cancels the wait. No wake-up marker is dropped here, unlike WorkerHandle.stop()."""
    q = api.queue()
    w = api.worker(q, {"t": api.handler()}, concurrency=1, block_timeout=5.0)
    await wait_until(lambda: any(cmd == "bzpopmin" for _, cmd in _names(api, q)),
                     timeout=5, what="the worker to block in BZPOPMIN")
    t0 = time.monotonic()
    w.worker.stop()
    await w.join(4)
    assert time.monotonic() - t0 < 1.0
    if api.driver == "glide":
        return  # closing a glide client does not end a block: it sends CLIENT UNBLOCK (see _glide_sync.py)
    stats = api.admin.info("commandstats")
    assert not [name for name in stats if "unblock" in name], "CLIENT UNBLOCK is missing on Dragonfly"


async def test_a_handler_escaping_exception_fails_its_attempt_and_keeps_its_slot(api):
    """sys.exit() in a thread handler, or a CancelledError an async handler raises itself (a
    cancelled future it awaited), is the handler's failure: before, the slot died with it and the
    job stayed active, its lease renewed for ever."""
    q = api.queue(max_attempts=1, keep_failed=-1)

    if api.is_async:
        async def escape(job):
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            await future
    else:
        def escape(job):
            raise SystemExit(3)

    w = api.worker(q, {"escape": escape, "work": api.handler(lambda j: None)}, concurrency=1)
    bad = await q.enqueue("escape", None)
    await wait_until(lambda: _settled(q, 0, 1), timeout=10, what="the escaping job to fail")
    stored = await q.get_job(bad.id)
    assert stored.state == "failed"
    assert ("CancelledError" if api.is_async else "SystemExit: 3") in stored.error
    await q.enqueue("work", None)  # the only slot still serves
    await wait_until(lambda: _completed(q, 1), timeout=10, what="the next job on the same slot")
    w.check_alive()
    w.stop()
    await w.join(10)


async def test_a_thread_task_of_an_asyncio_worker_is_not_released_at_the_shutdown_deadline(api):
    """A sync task on an AsyncWorker runs in a thread, which the deadline's cancel does not stop:
    its lease is left to expire, as in the thread Worker. Before, it was released and another
    worker could run the job while the thread still did."""
    if not api.is_async:
        pytest.skip("the thread Worker's case is test_graceful_shutdown_releases_what_it_cannot_finish")
    from conveyor._hooks import in_thread  # noqa: PLC0415 - how AsyncWorker wraps a sync task

    q = api.queue()
    started: list[str] = []

    async def nap(job):
        started.append(job.id)
        await asyncio.to_thread(time.sleep, 2.0)

    w = api.worker(q, {"nap": in_thread(nap, threaded=True)}, concurrency=1, shutdown_timeout=0.3)
    job = await q.enqueue("nap", None)
    await wait_until(lambda: started == [job.id], timeout=10, what="the handler to start")
    w.stop()
    await w.join(5)
    stored = await q.get_job(job.id)
    assert (stored.state, stored.attempts) == ("active", 1)
    assert await q.counts() == counts(active=1)


class _Abort(BaseException):
    """What a library's own abort signal may derive from: neither Exception nor SystemExit."""


@pytest.mark.parametrize("raised", [_Abort, SystemExit, KeyboardInterrupt])
async def test_any_base_exception_from_a_handler_fails_its_attempt(api, raised):
    """A handler raising outside Exception (a library's BaseException, sys.exit(), a
    KeyboardInterrupt of its own) fails its attempt like any error, on both surfaces. Before, a
    thread slot died with the job left active and its lease renewed for ever; an async one left
    it active too, and SystemExit ended the whole asyncio worker with every leased job stranded."""
    q = api.queue(max_attempts=1, keep_failed=-1)

    if api.is_async:
        async def escape(job):
            raise raised("escaping")
    else:
        def escape(job):
            raise raised("escaping")

    w = api.worker(q, {"escape": escape, "work": api.handler(lambda j: None)}, concurrency=1)
    bad = await q.enqueue("escape", None)
    await wait_until(lambda: _settled(q, 0, 1), timeout=10, what="the escaping job to fail")
    stored = await q.get_job(bad.id)
    assert stored.state == "failed" and raised.__name__ in stored.error
    await q.enqueue("work", None)  # the only slot still serves
    await wait_until(lambda: _completed(q, 1), timeout=10, what="the next job on the same slot")
    w.check_alive()
    w.stop()
    await w.join(10)


async def test_an_unexpected_maintenance_error_does_not_end_the_heartbeats(api, monkeypatch):
    """A maintenance tick that fails with an error outside the connection kinds (a bug, a parse
    error) is logged and retried, as in the thread Worker. Before, it ended the asyncio worker's
    maintenance task: heartbeats stopped while the handler ran, so another worker's recovery
    redelivered the job and it ran twice at once."""
    from conveyor import AsyncQueue, Queue  # noqa: PLC0415

    armed, raised = [False], []
    cls = AsyncQueue if api.is_async else Queue
    promote = cls.promote

    def failing_once(self, *args, **kwargs):
        if armed[0] and not raised:
            raised.append(1)
            raise RuntimeError("an unexpected maintenance error")
        return promote(self, *args, **kwargs)

    monkeypatch.setattr(cls, "promote", failing_once)
    q = api.queue(lease=1.0, keep_completed=-1, maintenance_interval=0.1)
    runs: list[str] = []
    handler = api.handler(sleep=3.0, start=lambda j: (runs.append(j.id), armed.__setitem__(0, True)))
    first = api.worker(q, {"slow": handler}, concurrency=1)
    job = await q.enqueue("slow", None)
    await wait_until(lambda: bool(raised), timeout=10, what="the first worker's maintenance to fail")
    other = api.queue(name=q.name, lease=1.0, keep_completed=-1, maintenance_interval=0.1)
    second = api.worker(other, {"slow": handler})
    await wait_until(lambda: _completed(q, 1), timeout=15, what="the slow job")
    await asyncio.sleep(0.5)
    first.check_alive()
    second.check_alive()
    assert runs == [job.id]  # once: its lease was renewed all along
    assert (await q.get_job(job.id)).attempts == 1
