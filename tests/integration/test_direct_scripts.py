"""Script calls straight on a pooled connection (conveyor/_direct.py) on real servers: used for
plain redis-py clients only, with the replies and errors execute_command would give."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import AsyncQueue, ConnectionFailedError, Queue, ServerError, _direct


def forbid_execute_command(client: Any) -> None:
    def refuse(*args: Any, **options: Any) -> Any:
        raise AssertionError(f"execute_command{args[:1]} on the script path")

    client.execute_command = refuse


async def test_a_plain_client_runs_scripts_without_execute_command(api):
    if api.driver != "redis-py":
        pytest.skip("redis-py clients only")
    q = api.queue()
    await q.enqueue("t", 0)  # the startup checks and each script's first load use execute_command
    await q.claim(1)
    forbid_execute_command(q.inner.client)
    jobs = [await q.enqueue("t", {"n": i}) for i in range(3)]
    claimed = await q.claim(3)
    assert [job.payload for job in claimed] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [job.id for job in claimed] == [job.id for job in jobs]


async def test_a_server_error_on_the_direct_path_raises_and_leaves_the_pool_usable(api):
    if api.driver != "redis-py":
        pytest.skip("redis-py clients only")
    q = api.queue(pool_size=1)
    await q.enqueue("t", 0)
    waiting = q.inner.core.keys.waiting
    api.admin.delete(waiting)
    api.admin.set(waiting, "not a list")
    with pytest.raises(ServerError, match="WRONGTYPE"):  # as through evalsha
        await q.enqueue("t", 1)
    api.admin.delete(waiting)
    job = await q.enqueue("t", 2)  # the one pooled connection still works, nothing left unread
    assert job.created and await q.counts() == counts(waiting=1)


class Subclassed(redis.Redis):
    pass


@pytest.mark.parametrize(
    "make",
    [
        Subclassed.from_url,
        lambda url: redis.Redis.from_url(url, single_connection_client=True),
    ],  # (a client with another encoding than UTF-8 is refused since 44740f6: test_audit_doc_followups)
    ids=["subclass", "single-connection"],
)
def test_other_sync_clients_keep_evalsha(server, make):
    client = make(server.url)
    q = Queue("direct-other", client)
    assert q._direct is None
    job = q.enqueue("t", {"a": 1})
    assert q.get_job(job.id).payload == {"a": 1}
    q.close()


def test_a_decoding_client_reads_the_same_jobs(server):
    q = Queue("direct-decoded", redis.Redis.from_url(server.url, decode_responses=True))
    assert q._direct is not None
    first = q.enqueue("t", {"a": 1})
    again = q.enqueue("t", {"a": 2}, job_id="given")
    same = q.enqueue("t", {"a": 3}, job_id="given")
    assert (first.state, again.created, same.created, same.payload) == ("waiting", True, False, {"a": 2})
    q.close()


async def test_an_asyncio_plain_client_uses_the_direct_path(server):
    client = aredis.Redis.from_url(server.url)
    q = AsyncQueue("direct-async", client)
    assert q._direct is not None
    await q.enqueue("t", 0)
    forbid_execute_command(client)
    job = await q.enqueue("t", {"a": 1})
    assert job.created and job.payload == {"a": 1}
    await client.aclose()


def _count_async_checkouts(pool: Any) -> list[int]:
    """Record every connection taken from an asyncio pool from now on."""
    taken: list[int] = []
    get_connection = pool.get_connection

    async def counted(*args: Any, **options: Any) -> Any:
        taken.append(1)
        return await get_connection(*args, **options)

    pool.get_connection = counted
    return taken


async def test_a_held_connection_is_kept_between_calls_and_replaced_after_a_break(server):
    """The pump's held connection: back-to-back calls never take a connection from the pool; one
    broken under it fails its call and goes back to the pool (disconnected, nothing half-read),
    and the next call gets a working one."""
    client = aredis.Redis.from_url(server.url, max_connections=1, client_name="held-test")
    q = AsyncQueue("direct-held", client)
    q._hold_connection()
    await q.enqueue("t", 0)
    pool, taken = client.connection_pool, _count_async_checkouts(client.connection_pool)
    for i in range(1, 4):
        await q.enqueue("t", i)
    assert taken == []  # the same connection for every call
    admin = redis.Redis.from_url(server.url)
    held_id = next(c["id"] for c in admin.client_list() if c["name"] == "held-test")
    admin.client_kill_filter(_id=held_id)
    with pytest.raises(ConnectionFailedError):
        await q.enqueue("t", 4)
    assert q._direct._conn is None  # type: ignore[union-attr]  # back in the pool, not reused
    job = await q.enqueue("t", 5)  # a working connection, from the pool
    assert taken == [1]
    await q._put_back()  # the pool has one connection: other commands need it back
    assert job.created and (await q.get_job(job.id)).payload == 5
    await q.enqueue("t", 6)
    assert pool._in_use_connections  # held again
    await q.aclose()
    assert not pool._in_use_connections  # put back on close
    admin.close()


async def test_every_asyncio_call_uses_the_held_connection_when_no_other_task_has_it(server):
    """Without batching too, one task's back-to-back calls take nothing from the pool (before,
    only the batcher's lone enqueue held a connection)."""
    client = aredis.Redis.from_url(server.url)
    q = AsyncQueue("direct-aheld-every", client, batch_enqueue=False)
    await q.enqueue("t", 0)
    await q.ack((await q.claim(1))[0])  # each script's first call loads it (through the pool)
    taken = _count_async_checkouts(client.connection_pool)
    jobs = [await q.enqueue("t", i) for i in range(1, 4)]
    claimed = await q.claim(3)
    await q.ack(claimed[0])
    assert taken == [] and [j.id for j in claimed] == [j.id for j in jobs]
    lone = q._lone
    assert lone is not None and lone.take()  # as another task in the middle of a call
    try:
        job = await q.enqueue("t", 4)  # goes through the pool
        assert taken == [1] and (await q.get_job(job.id)).payload == 4
    finally:
        lone.give()
    await q.aclose()


async def test_tasks_enqueueing_at_once_without_batching_each_get_their_own_jobs(server):
    q = AsyncQueue("direct-aheld-tasks", aredis.Redis.from_url(server.url), batch_enqueue=False)

    async def producer(n: int) -> list[Any]:
        return [await q.enqueue("t", {"p": n, "i": i}) for i in range(100)]

    results = await asyncio.gather(*(producer(n) for n in range(16)))
    ids = [job.id for jobs in results for job in jobs]
    assert len(set(ids)) == len(ids) == 1600
    for n, jobs in enumerate(results):
        payloads = [(await q.get_job(j.id)).payload for j in jobs[::10]]
        assert payloads == [{"p": n, "i": i} for i in range(0, 100, 10)]
    assert (await q.counts())["waiting"] == 1600
    await q.aclose()


def _count_checkouts(pool: Any) -> list[int]:
    taken: list[int] = []
    get_connection = pool.get_connection

    def counted(*args: Any, **options: Any) -> Any:
        taken.append(1)
        return get_connection(*args, **options)

    pool.get_connection = counted
    return taken


def test_a_lone_sync_enqueue_keeps_its_connection_and_survives_a_kill(server):
    """The sync batcher's lone call holds one connection: back-to-back enqueues take nothing from
    the pool. A held connection the server closed while idle is reconnected before the next call
    (as the pool's checkout would), so that call succeeds and creates exactly one job."""
    client = redis.Redis.from_url(server.url, client_name="held-sync")
    q = Queue("direct-held-sync", client)
    first = q.enqueue("t", 0)
    taken = _count_checkouts(client.connection_pool)
    jobs = [q.enqueue("t", i) for i in range(1, 4)]
    assert taken == []
    admin = redis.Redis.from_url(server.url)
    for c in admin.client_list():
        if c["name"] == "held-sync":
            admin.client_kill_filter(_id=c["id"])
    job = q.enqueue("t", 4)
    assert job.created and q.get_job(job.id).payload == 4
    ids = [first.id, *(j.id for j in jobs), job.id]
    assert [j.id for j in q.claim(10)] == ids  # each once, in order: nothing lost or doubled
    q.close()
    assert not client.connection_pool._in_use_connections  # put back on close
    admin.close()


def test_every_sync_call_uses_the_held_connection_when_no_other_thread_has_it(server):
    """Without batching too, back-to-back calls of one thread take nothing from the pool (before,
    only the batcher's lone enqueue held a connection: every other call checked one out)."""
    client = redis.Redis.from_url(server.url)
    q = Queue("direct-held-every", client, batch_enqueue=False)
    q.enqueue("t", 0)
    q.ack(q.claim(1)[0])  # each script's first call loads it (through the pool)
    taken = _count_checkouts(client.connection_pool)
    jobs = [q.enqueue("t", i) for i in range(1, 4)]
    claimed = q.claim(3)
    q.ack(claimed[0])
    assert taken == []
    assert [j.id for j in claimed] == [j.id for j in jobs]
    assert q._held is not None and q._held.take()  # free again after the calls
    q._held.give()
    q.close()


def test_a_call_while_another_thread_has_the_held_connection_goes_through_the_pool(server):
    client = redis.Redis.from_url(server.url)
    q = Queue("direct-held-busy", client, batch_enqueue=False)
    q.enqueue("t", 0)
    held = q._held
    assert held is not None and held.take()  # as another thread in the middle of a call
    try:
        taken = _count_checkouts(client.connection_pool)
        job = q.enqueue("t", 1)
        assert taken == [1] and q.get_job(job.id).payload == 1
    finally:
        held.give()
    q.close()


def test_threads_enqueueing_at_once_without_batching_each_get_their_own_jobs(server):
    """Eight threads share the held connection and the pool: every job is created once, each
    caller reads its own reply (a shared connection would cross them)."""
    q = Queue("direct-held-threads", redis.Redis.from_url(server.url), batch_enqueue=False)
    results: dict[int, list[Any]] = {}

    def producer(n: int) -> None:
        results[n] = [q.enqueue("t", {"p": n, "i": i}) for i in range(150)]

    threads = [threading.Thread(target=producer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ids = [job.id for jobs in results.values() for job in jobs]
    assert len(results) == 8 and len(set(ids)) == len(ids) == 1200
    for n, jobs in results.items():
        assert [q.get_job(j.id).payload for j in jobs] == [{"p": n, "i": i} for i in range(150)]
    assert q.counts()["waiting"] == 1200
    q.close()


def test_a_child_forked_while_the_held_connection_was_taken_can_hold_its_own(server):
    q = Queue("direct-held-fork", redis.Redis.from_url(server.url), batch_enqueue=False)
    q.enqueue("t", 0)
    held = q._held
    assert held is not None and held.take()  # a parent thread mid-call at the fork

    def child() -> None:
        taken = _count_checkouts(q.client.connection_pool)
        jobs = [q.enqueue("t", f"child-{i}") for i in range(20)]
        assert len(taken) == 1  # one connection of its own, then held: not one per call
        assert [q.get_job(j.id).payload for j in jobs] == [f"child-{i}" for i in range(20)]

    try:
        proc = multiprocessing.get_context("fork").Process(target=child)
        proc.start()
        proc.join(30)
    finally:
        held.give()
    assert proc.exitcode == 0 and q.counts()["waiting"] == 21
    q.close()


def test_a_small_pool_is_not_held(server):
    client = redis.Redis.from_url(server.url, max_connections=3)
    q = Queue("direct-small", client)
    assert q._held is None
    q.enqueue("t", 0)
    assert not client.connection_pool._in_use_connections
    q.close()


def test_a_forked_child_enqueues_on_its_own_connection(server):
    """A child process never writes on its parent's held socket (replies would cross)."""
    q = Queue("direct-fork", redis.Redis.from_url(server.url))
    q.enqueue("t", "parent-0")

    def child() -> None:
        jobs = [q.enqueue("t", f"child-{i}") for i in range(50)]
        assert [q.get_job(j.id).payload for j in jobs] == [f"child-{i}" for i in range(50)]

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    mine = [q.enqueue("t", f"parent-{i}") for i in range(1, 51)]
    proc.join(30)
    assert proc.exitcode == 0
    assert [q.get_job(j.id).payload for j in mine] == [f"parent-{i}" for i in range(1, 51)]
    assert q.counts()["waiting"] == 101
    q.close()


def test_a_lone_asyncio_enqueue_keeps_its_connection_and_is_replaced_after_a_kill(server):
    """The asyncio batcher's lone call holds one connection as the sync one does; one closed by
    the server costs at most one failed call (creating nothing), and is replaced."""
    client = aredis.Redis.from_url(server.url, client_name="held-async")
    q = AsyncQueue("direct-held-async", client)
    admin = redis.Redis.from_url(server.url)
    ids: list[str] = []

    async def first_loop() -> tuple[list[int], int]:
        ids.append((await q.enqueue("t", 0)).id)
        taken = _count_async_checkouts(client.connection_pool)
        ids.extend([(await q.enqueue("t", i)).id for i in range(1, 4)])
        assert taken == []  # the same connection for every lone call
        for c in admin.client_list():
            if c["name"] == "held-async":
                admin.client_kill_filter(_id=c["id"])
        await asyncio.sleep(0.1)
        # The pool's check runs before each held call. Where it lets a closed connection through
        # (redis-py before 8.2 with maintenance notifications on, as by default with RESP3), the
        # call fails, creating nothing, and the connection goes back to the pool; from redis-py
        # 8.2 the check reconnects it in place and the call succeeds.
        failed = 0
        try:
            ids.append((await q.enqueue("t", 4)).id)
        except ConnectionFailedError:
            failed = 1
        ids.append((await q.enqueue("t", 5)).id)
        await q.aclose()
        return taken, failed

    taken, failed = asyncio.run(first_loop())
    assert taken == [1] * failed  # a new connection only after a failed call
    names = [c["name"] for c in admin.client_list()]
    assert "held-async" not in names  # closed by aclose, whichever connection it was
    waiting = admin.lrange(q.core.keys.waiting, 0, -1)
    assert [i.decode() for i in reversed(waiting)] == ids  # each job once, in order
    admin.close()


# Busy for tens of ms, so its reply is not there yet when the next call checks its connection
# (a count, not a clock: a script may see the server's time frozen while it runs).
SLOW_SCRIPT = "local n = 0 for i = 1, 5000000 do n = n + i end return 'slow'"


@pytest.mark.parametrize("kind", ["DirectScripts", "HeldScripts"])
def test_an_interrupt_between_the_write_and_the_read_leaves_no_reply_for_the_next_call(
    server, kind, monkeypatch
):
    """A KeyboardInterrupt landing after the command was written but before its reply was read
    gave the connection back to the pool with that reply still to come: the next call on it read
    the interrupted call's reply as its own (here 'slow' for the 'fast' script)."""
    client = redis.Redis.from_url(server.url)
    slow, fast = client.script_load(SLOW_SCRIPT), client.script_load("return 'fast'")
    scripts = getattr(_direct, kind).of(client)
    assert scripts is not None
    sent = redis.connection.Connection.send_packed_command

    def interrupted_after_writing(self: Any, command: Any, check_health: bool = True) -> None:
        sent(self, command, check_health)
        monkeypatch.undo()
        raise KeyboardInterrupt

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", interrupted_after_writing)
    with pytest.raises(KeyboardInterrupt):
        scripts.evalsha(slow, [], [])
    assert scripts.evalsha(fast, [], []) == b"fast"
    client.close()
