"""Follow-ups of earlier audits: duplicate acks in one call, calls in flight at close(), a glide
client created while aclose() runs, and counts() of a queue of a newer layout.

Each test failed before its fix, except where its docstring says it guards a behaviour that held.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    run_in_thread,
    wait_until,
)
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    Conveyor,
    Job,
    Limit,
    QueueClosedError,
    SchemaVersionError,
    Worker,
)
from conveyor._dispatch import Dispatcher, WorkerOptions
from conveyor._runner import Runner
from conveyor._topology import ASYNC, role_client

from bench.servers import RunningServer

NEWER = "2"  # a layout version this Conveyor does not read


def _glide_installed(driver: str) -> None:
    if driver == "glide":
        pytest.importorskip("glide", reason="valkey-glide is not installed")


# -- 1. ack.lua: the same (id, token) twice in one call ------------------------------------------
@pytest.mark.parametrize("keep", [0, 10])
async def test_a_job_acked_twice_in_one_call_is_completed_and_counted_once(api, keep):
    """With keep_completed=0 (the default) ack.lua deletes the acked jobs after its loop, so the
    same (id, token) given twice in one call passed the lease check twice: total_completed 2 for
    one job, and its limit key's running count lowered twice, one slot freed too many (a parked job
    of a concurrency-2 key started beside the two still counted as running). The worker never
    sends it (see the next test); the script path it uses is called here directly."""
    q = api.queue(keep_completed=keep)
    limit = Limit("k", concurrency=2)
    ids = [(await q.enqueue("t", i, limit=limit)).id for i in range(4)]
    a, b = await q.claim(4)  # the other two are parked at the key's concurrency
    assert [a.id, b.id] == ids[:2]
    statuses, claimed, _ = await q._run(q.inner.core.ack([a, a], 4, request=("w", 0)))
    assert statuses == [1, 0]  # the repeat: its first ack cleared the token, as with keep > 0
    assert [j.id for j in claimed] == [ids[2]]  # one slot freed: b still runs
    assert await q.counts() == counts(active=2, waiting=1, total_completed=1,
                                      completed=1 if keep else 0)  # fmt: skip


def test_a_worker_resends_a_lost_ack_alone_never_beside_new_ones() -> None:
    """Why a worker cannot send an (id, token) twice in one call: after a call whose reply never
    came, the next call re-sends the same pinned batch (same request id), and jobs finished
    meanwhile wait for the call after it; a job leaves `done` once its ack is answered. This held
    before: it records why the script's defect was out of a worker's reach."""
    d = Dispatcher(WorkerOptions(concurrency=4), lease=30)
    jobs = [Job(str(i), "t", "active", None, 1, 1, 0.0, f"tok{i}") for i in range(4)]
    d.on_claimed(jobs)
    for job in jobs[:2]:
        d.on_started(job)
        d.on_finished(job, None)
    first = d.pending_acks()
    assert d.on_sending(first) == ((d.worker_id, 0), False)
    # the reply is lost; two more finish before the call is sent again
    for job in jobs[2:]:
        d.on_started(job)
        d.on_finished(job, None)
    again = d.pending_acks()
    assert again is first and [j.id for j in again] == ["0", "1"]
    assert d.on_sending(again) == ((d.worker_id, 0), True)
    d.on_acked(again, [1, 1])
    assert [j.id for j in d.pending_acks()] == ["2", "3"]


# -- 2. a call in flight when the queue is closed -------------------------------------------------
async def test_an_enqueue_in_flight_at_close_says_it_may_have_been_applied(api):
    """redis-py closes the connections of calls in flight at close() / aclose(): an enqueue
    waiting for its reply raised ConnectionFailedError 'cannot reach the server' (retried for
    ever by callers, and false: the server was there). glide's said 'was closed ... cannot be
    used again', as if nothing had been sent. Both are now QueueClosedError, maybe_applied True
    for a call that may have been sent and False only for one that was not, so a job whose
    enqueue said False does not exist. (A sync call in flight may also complete.)"""
    if api.server.family == "dragonfly":
        pytest.skip("dragonfly: CLIENT PAUSE WRITE is checked on Redis and Valkey")
    q = api.queue()
    await q.enqueue("t", "first")  # connected, layout checked
    api.admin.execute_command("CLIENT", "PAUSE", 1500, "WRITE")  # enqueues wait for their reply
    try:
        calls = [asyncio.ensure_future(q.enqueue("t", i, job_id=f"j{i}")) for i in range(12)]
        await asyncio.sleep(0.3)  # sent, held by the pause
        closing = asyncio.ensure_future(q.close())  # glide's sync close() waits for them
        await asyncio.sleep(0.3)
    finally:
        api.admin.execute_command("CLIENT", "UNPAUSE")
    await asyncio.wait_for(closing, 15)
    replies = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 15)
    errors = [r for r in replies if not isinstance(r, Job)]
    assert all(isinstance(e, QueueClosedError) and not isinstance(e, ConnectionFailedError)
               for e in errors), errors  # fmt: skip
    for i, reply in enumerate(replies):
        exists = api.admin.exists(q.keys.job(f"j{i}"))
        if isinstance(reply, Job):
            assert exists, reply
        elif not reply.maybe_applied:
            assert not exists and "not sent" in str(reply), reply
        else:
            assert "may have been applied or not" in str(reply)
    if api.is_async:  # (a sync call in flight may complete: glide waits for it, and a redis-py
        # socket closed under a thread's read does not always end that read)
        assert any(e.maybe_applied for e in errors), "no call was in flight at aclose"


async def test_a_closed_async_queue_still_tells_calls_after_it_apart_from_calls_in_flight(
    redis_url: str, queue_name: str, driver: str
) -> None:
    """A call made after aclose(): redis-py opens a new connection (it succeeds), glide cannot
    (QueueClosedError, maybe_applied False: nothing was sent). A result wait ended by aclose()
    changes nothing: maybe_applied False. This held before, except the error types."""
    _glide_installed(driver)
    queue = AsyncQueue.from_url(redis_url, queue_name, driver=driver, store_results=True)
    job = await queue.enqueue("t", 1)
    waiting = asyncio.ensure_future(queue.result(job.id, 10))
    await wait_until(lambda: queue._results.registry.waiting, what="the result wait to register")
    await queue.aclose()
    with pytest.raises(QueueClosedError, match="was closed while waiting") as caught:
        await asyncio.wait_for(waiting, 5)
    assert caught.value.maybe_applied is False
    if driver == "redis-py":
        assert (await queue.enqueue("t", 2)).state == "waiting"
        await queue.aclose()
        return
    with pytest.raises(QueueClosedError, match="not sent") as caught:
        await queue.enqueue("t", 2)
    assert caught.value.maybe_applied is False


# -- 3. glide: aclose() while the first call connects ---------------------------------------------
def _named(server: RunningServer, name: str) -> list[dict[str, Any]]:
    with server.client() as admin:
        return [c for c in admin.client_list() if c.get("name") == name]


class _SlowProxy:
    """Forwards 127.0.0.1:<port> to the server, each connection only after ``delay`` seconds: a
    connect (glide's handshake) stays in progress that long."""

    def __init__(self, upstream: int, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="slow-proxy")

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(self.delay)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def __enter__(self) -> int:
        self.thread.start()

        async def listen() -> int:
            self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
            return int(self.server.sockets[0].getsockname()[1])

        return asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


async def _closed_during_connect(url: str, queue_name: str, admin_server: RunningServer,
                                 settle: float) -> QueueClosedError:  # fmt: skip
    """A named glide queue whose first call is in progress when aclose() runs: no connection of
    that name remains, and later calls raise the closed-queue error. Returns the first call's."""
    base = AsyncQueue.from_url(url, queue_name, driver="glide")
    queue = AsyncQueue(queue_name, role_client(ASYNC, base.client, queue_name, "probe", 1.0))
    name = f"conveyor:{queue_name}:probe"
    first = asyncio.ensure_future(queue.counts())
    await asyncio.sleep(settle)  # the first call is connecting
    await queue.aclose()
    with pytest.raises(QueueClosedError) as caught:
        await asyncio.wait_for(first, 10)
    await asyncio.sleep(1.0)  # past the proxy's delay: a connect still going on would be done
    assert _named(admin_server, name) == []
    with pytest.raises(QueueClosedError, match="not sent"):
        await queue.counts()
    await base.aclose()
    return caught.value


async def test_aclose_during_glides_first_connect_leaves_no_connection(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """glide (2.5, 2.6) creates its client without yielding to the loop and connects at the first
    command, after the client is kept, so aclose() during that connect closes it: nothing is left
    open. This held before; it guards that path (a connect held 0.5 s by a proxy)."""
    if driver != "glide":
        pytest.skip("the glide driver's connect")
    _glide_installed(driver)
    with _SlowProxy(server.port, 0.5) as port:
        await _closed_during_connect(f"redis://127.0.0.1:{port}/0", queue_name, server, 0.1)


async def test_a_glide_client_created_while_aclose_runs_is_closed_not_kept(
    server: RunningServer, queue_name: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GlideClient.create() that yields to the loop (glide's own credential-provider path
    does) let aclose() run meanwhile: aclose() found no client to close, the creation then kept
    its client, the call went on with it and its named connection stayed open until the process
    ended. The client is now closed as it is created, and the call says it was not sent."""
    if driver != "glide":
        pytest.skip("the glide driver's connect")
    glide = pytest.importorskip("glide", reason="valkey-glide is not installed")
    create = glide.GlideClient.create

    async def slow_create(cls: Any, config: Any) -> Any:
        await asyncio.sleep(0.3)
        return await create.__func__(cls, config)

    monkeypatch.setattr(glide.GlideClient, "create", classmethod(slow_create))
    error = await _closed_during_connect(server.url, queue_name, server, 0.1)
    assert error.maybe_applied is False and "not sent" in str(error)


# -- 4. counts() / info of a queue written by a newer layout --------------------------------------
async def test_counts_of_a_queue_of_a_newer_layout_is_refused_as_other_calls_are(api):
    """counts() (and so `conveyor info`, and the Runner's check before its workers start) read
    the queue's keys without its layout version: a queue of a newer layout gave numbers read with
    this layout's keys, where every script call raises SchemaVersionError. Counting a queue that
    does not exist still writes nothing."""
    q = api.queue()
    await q.enqueue("t", 1)
    api.admin.hset(q.keys.meta, "v", NEWER)
    fresh = api.queue()
    with pytest.raises(SchemaVersionError, match=f"layout version {NEWER}") as counted:
        await fresh.counts()
    with pytest.raises(SchemaVersionError) as enqueued:
        await fresh.enqueue("t", 2)
    assert str(counted.value) == str(enqueued.value)
    unknown = api.queue(f"{api.name}-none")
    assert await unknown.counts() == counts()
    assert api.queue_keys(unknown.name) == []


def test_conveyor_info_and_a_runner_refuse_a_queue_of_a_newer_layout(
    redis_url: str, queue_name: str, tmp_path: Any
) -> None:
    """`conveyor info` printed the counts of such a queue; `conveyor worker` (the Runner) counts
    each queue first so that a layout it cannot read fails the run at once, and started workers
    that retried the refused calls for ever."""
    import redis  # noqa: PLC0415

    with redis.Redis.from_url(redis_url) as admin:
        admin.hset(f"cv:{{{queue_name}}}:meta", "v", NEWER)
    (tmp_path / "newer_app.py").write_text(
        f"from conveyor import Conveyor\napp = Conveyor({redis_url!r}, default_queue={queue_name!r})\n"
        "@app.task\ndef t() -> None:\n    pass\n"
    )
    command = [sys.executable, "-m", "conveyor", "info", "newer_app:app", "--json"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1 and result.stdout == "", (result.stdout, result.stderr)
    assert f"layout version {NEWER}" in result.stderr

    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task
    def t() -> None:
        pass

    runner = Runner(app, [queue_name])
    started = time.monotonic()
    thread, outcome = run_in_thread(runner.run)
    thread.join(10)
    if thread.is_alive():
        runner.stop()
        thread.join(10)
    assert outcome and isinstance(outcome[0], SchemaVersionError), outcome
    assert time.monotonic() - started < 10
    app.close()


# -- 5. a Worker / AsyncWorker started directly on a queue of a newer layout ----------------------
async def test_a_worker_on_a_queue_of_a_newer_layout_ends_with_the_error_not_retrying(api, caplog):
    """A worker started in code (not through the Runner, which counts each queue first) retried
    the refused call for ever, logging 'worker lost the server' every backoff: no retry can
    make this Conveyor read another layout. Its run() now ends with the SchemaVersionError, logged
    once as an error that stops it; the queue's jobs stay as they were."""
    q = api.queue()
    job = await q.enqueue("t", 1)
    api.admin.hset(q.keys.meta, "v", NEWER)
    ran: list[str] = []
    with caplog.at_level("WARNING", logger="conveyor.worker"):
        handle = api.worker(api.queue(), {"t": api.handler(lambda j: ran.append(j.id))})
        with pytest.raises(SchemaVersionError, match=f"layout version {NEWER}"):
            await handle.join(10)
    assert "lost the server" not in caplog.text and "retrying" not in caplog.text, caplog.text
    stops = [r for r in caplog.records if "stops" in r.getMessage()]
    assert len(stops) == 1 and stops[0].levelname == "ERROR", caplog.text
    assert ran == [] and api.admin.lrange(q.keys.waiting, 0, -1) == [job.id.encode()]
    assert api.admin.hget(q.keys.meta, "v") == NEWER.encode()


async def test_jobs_buffered_when_a_worker_run_ends_on_an_error_are_never_started(api, monkeypatch):
    """The sync worker's slots went on taking the jobs prefetched into its buffer after run()
    had ended on an error its pump does not retry (found by an audit): each was started with no
    heartbeat to renew its lease and no pump to ack it, and lease recovery then ran it again.
    Like every job this worker held, it is left to lease recovery unstarted. (The pump's next
    call is made to raise the error, as a queue of a newer layout does at a worker's first call.)"""
    cls = AsyncWorker if api.is_async else Worker
    real, fatal = cls._exchange, SchemaVersionError(f"layout version {NEWER}")
    broken: list[bool] = []

    def exchange(self: Any, pump: Any) -> Any:
        if broken:
            raise fatal
        return real(self, pump)

    async def async_exchange(self: Any, pump: Any) -> Any:
        if broken:
            raise fatal
        return await real(self, pump)

    monkeypatch.setattr(cls, "_exchange", async_exchange if api.is_async else exchange)
    q = api.queue(lease=3.0)
    ran: list[str] = []
    started = lambda j: ran.append(j.task)  # noqa: E731
    handlers = {"long": api.handler(lambda j: ran.append("returned"), sleep=0.8, start=started),
                "short": api.handler(start=started)}  # fmt: skip
    handle = api.worker(q, handlers, concurrency=1, prefetch=2)
    await q.enqueue("long")
    await wait_until(lambda: ran == ["long"], timeout=10, what="the long job to start")
    short = await q.enqueue("short")
    await wait_until(lambda: _state_is(q, short.id, "active"), timeout=10, what="the buffered claim")
    broken.append(True)
    handle.wake()  # the pump claims again (its buffer has room): its call raises
    with pytest.raises(SchemaVersionError):
        await handle.join(10)
    if not api.is_async:  # (the asyncio twin cancels its slots as run() ends)
        await wait_until(lambda: "returned" in ran, timeout=10, what="the long handler to return")
    await asyncio.sleep(0.3)  # time for its free slot to take the next job
    assert ran == (["long"] if api.is_async else ["long", "returned"])


async def _state_is(q: Any, job_id: str, state: str) -> bool:
    job = await q.get_job(job_id)
    return job is not None and job.state == state


# -- 6. get_job() and jobs() of a queue of a newer layout -----------------------------------------
LISTED = ("delayed", "active", "completed", "failed", "cancelled")  # read without a script call


async def test_get_job_and_jobs_of_a_queue_of_a_newer_layout_are_refused_as_other_calls_are(api):
    """get_job() and jobs(state) (but for waiting, a script call) read the queue's keys without
    its layout version: a job of a newer layout was parsed with this layout's fields, and a page
    listed with its keys. Both now read meta v in the round trip they send and raise the same
    SchemaVersionError; reading a queue that does not exist still writes nothing."""
    q = api.queue()
    delayed = await q.enqueue("t", 1, delay=60)
    api.admin.hset(q.keys.meta, "v", NEWER)
    fresh = api.queue()
    with pytest.raises(SchemaVersionError, match=f"layout version {NEWER}"):
        await fresh.get_job(delayed.id)
    with pytest.raises(SchemaVersionError, match=f"layout version {NEWER}"):
        await fresh.get_job("no-such-job")
    for state in LISTED:
        with pytest.raises(SchemaVersionError, match=f"layout version {NEWER}"):
            await fresh.jobs(state)
    unknown = api.queue(f"{api.name}-none")
    assert await unknown.get_job(delayed.id) is None
    assert [await unknown.jobs(state) for state in LISTED] == [[]] * len(LISTED)
    assert api.queue_keys(unknown.name) == []


# -- 7. a strict worker on a server whose eviction policy it refuses ------------------------------
async def test_a_strict_worker_on_an_evicting_server_names_the_configuration_not_a_lost_server(api, caplog):
    """With strict=True the server's eviction policy is checked at the worker's first call and a
    policy that can evict jobs raises ServerConfigError; the worker retried it logging 'worker
    lost the server (the server's maxmemory-policy is ...)', though the server was reached, so
    an operator looked at the network. It is still retried (setting noeviction lets the worker
    go on, as the job below shows), logged as the configuration it refuses."""
    if api.server.family == "dragonfly":
        pytest.skip("dragonfly: its eviction is cache_mode, checked on Redis and Valkey")
    before = api.config("maxmemory-policy")
    q = api.queue()
    api.admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        done: list[str] = []
        with caplog.at_level("WARNING", logger="conveyor.worker"):
            api.worker(api.queue(strict=True), {"t": api.handler(lambda j: done.append(j.id))})
            await wait_until(lambda: "maxmemory-policy" in caplog.text, what="the refusal logged")
    finally:
        api.admin.config_set("maxmemory-policy", before)
    assert "lost the server" not in caplog.text, caplog.text
    assert "worker refuses the server's configuration (the server's maxmemory-policy" in caplog.text
    job = await q.enqueue("t", 1)
    await wait_until(lambda: done == [job.id], timeout=10, what="the job run once noeviction is set")


# -- 8. a scheduler with a schedule on a queue of a newer layout ----------------------------------
def test_a_schedule_on_a_queue_of_a_newer_layout_does_not_stop_the_other_queues_schedules(
    redis_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The fire call of a queue of a newer layout raises SchemaVersionError, which aborted the
    whole tick: the schedules of every queue after it never fired, and 'scheduler tick failed
    (...); will retry' was logged every tick, though no retry can fix it. That queue's schedules
    are now skipped, with one error naming it; the others fire."""
    from conveyor._scheduler import Scheduler  # noqa: PLC0415

    newer = f"{queue_name}-newer"
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task(queue=newer)
    def first() -> None:
        pass

    @app.task
    def second() -> None:
        pass

    app.periodic("on-newer", first, every=20)  # its queue's schedules are read first
    app.periodic("on-this", second, every=20)
    import redis  # noqa: PLC0415

    with redis.Redis.from_url(redis_url) as admin:
        admin.hset(f"cv:{{{newer}}}:meta", "v", NEWER)
    scheduler = Scheduler(app)
    t0 = 1_800_000_000
    with caplog.at_level("WARNING", logger="conveyor.scheduler"):
        created = [scheduler.tick(now=t0 + s) for s in (0, 40, 80)]
    assert created[1:] == [[f"cron:on-this:{(t0 + 40) * 1000}"], [f"cron:on-this:{(t0 + 80) * 1000}"]]
    refused = [r for r in caplog.records if newer in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelname == "ERROR", caplog.text
    assert f"layout version {NEWER}" in refused[0].getMessage()
    app.close()
