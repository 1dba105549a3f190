"""Bad inputs and bad environments: each gets its own clear error and leaves no partial state."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time

import pytest
import redis
import redis.asyncio as aredis
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import (
    AsyncQueue,
    ConnectionFailedError,
    Conveyor,
    InvalidNameError,
    JobSpec,
    PayloadTooLargeError,
    PoolExhaustedError,
    Queue,
    SerializationError,
    ServerConfigError,
)

BAD_ENQUEUES = [
    (("t", "x" * 300), {}, PayloadTooLargeError, r"is 302 bytes encoded; the limit is 256 bytes"),
    (("t", {1, 2}), {}, SerializationError, r"payload of task 't' cannot be serialized \(set\)"),
    (("t", {"v": math.nan}), {}, SerializationError, "cannot be serialized"),
    (("t", b"bytes"), {}, SerializationError, "cannot be serialized"),
    (("t", object()), {}, SerializationError, "cannot be serialized"),
    (("", 1), {}, InvalidNameError, "task name must not be empty"),
    (("a{b", 1), {}, InvalidNameError, r"must not contain '\{' or '\}'"),
    (("a}b", 1), {}, InvalidNameError, "hash tag"),
    (("t" * 201, 1), {}, InvalidNameError, "limit is 200"),
    (("t", 1), {"job_id": "12345"}, InvalidNameError, "only of digits"),
    (("t", 1), {"job_id": ""}, InvalidNameError, "must not be empty"),
    (("t", 1), {"job_id": "x{1}"}, InvalidNameError, "hash tag"),
    (("t", 1), {"delay": -0.5}, ValueError, "delay must be a finite number of seconds >= 0, got -0.5"),
    (("t", 1), {"delay": float("inf")}, ValueError, "delay must be a finite number of seconds >= 0, got inf"),
    (("t", 1), {"delay": "5"}, ValueError, "delay must be a finite number of seconds >= 0, got '5'"),
    (("t", 1), {"max_attempts": 0}, ValueError, "max_attempts must be an int >= 1"),
    # Finite but past every duration's bound: an OverflowError from the ms conversion before.
    (("t", 1), {"delay": 1e308}, ValueError, r"delay must be at most 1e\+09 s, got 1e\+308"),
    (("t", 1), {"time_limit": 1e308}, ValueError, r"time_limit must be at most 1e\+09 s, got 1e\+308"),
]


async def _try_every_bad_input(api, q):
    for args, kwargs, error, message in BAD_ENQUEUES:
        with pytest.raises(error, match=message):
            await q.enqueue(*args, **kwargs)
    with pytest.raises(PayloadTooLargeError):
        await q.enqueue_many([JobSpec("t", 1), JobSpec("t", "y" * 1000)])
    with pytest.raises(TypeError, match=r"a JobSpec or a \(task, payload, \.\.\.\) tuple, got 'xyz'"):
        await q.enqueue_many([("t", 1), "xyz"])  # a string was unpacked: task x, payload y, id z
    with pytest.raises(InvalidNameError):
        await q.cancel("")
    with pytest.raises(ValueError, match=r"count must be an int in 0\.\.1000, got 1001"):
        await q.claim(count=1001)
    with pytest.raises(ValueError, match=r"lease must be >= 0\.05"):
        await q.claim(lease=0.01)
    for lease in (math.inf, math.nan, 1e12, True):  # an OverflowError or a bare ValueError before
        refusal = rf"lease must be >= 0\.05 s and at most 1e\+09 s, got {lease!r}"
        with pytest.raises(ValueError, match=refusal):
            await q.claim(lease=lease)
    with pytest.raises(ValueError, match=r"batch must be an int in 1\.\.100000, got 0"):
        await q.promote(batch=0)
    with pytest.raises(ValueError, match=r"batch must be an int in 1\.\.100000, got 100001"):
        await q.recover(batch=100_001)


async def test_bad_inputs_on_a_fresh_queue_write_nothing(api):
    q = api.queue(max_payload_bytes=256)
    keys = api.all_keys()
    await _try_every_bad_input(api, q)
    assert api.queue_keys() == []
    assert api.all_keys() <= keys


async def test_bad_inputs_on_a_busy_queue_change_nothing(api):
    q = api.queue(max_payload_bytes=256)
    await q.enqueue_many([("t", 1), JobSpec("t", 2, delay=60), ("t", 3)])
    [leased] = await q.claim()
    snap, before, keys = api.snapshot(), await q.counts(), api.all_keys()
    await _try_every_bad_input(api, q)
    assert api.snapshot() == snap
    assert await q.counts() == before == counts(waiting=1, delayed=1, active=1)
    assert api.all_keys() <= keys
    await q.ack(leased)  # the queue still works
    ok = await q.enqueue("t", "x" * 200)  # below the limit
    assert (await q.get_job(ok.id)).payload == "x" * 200


BAD_COUNTS = [
    ("jobs", ("waiting",), {"offset": 1.5}, r"offset must be an int >= 0, got 1\.5"),
    ("jobs", ("failed",), {"offset": 1.5}, r"offset must be an int >= 0, got 1\.5"),
    ("jobs", ("delayed",), {"offset": True}, r"offset must be an int >= 0, got True"),
    ("jobs", ("waiting",), {"offset": "1"}, r"offset must be an int >= 0, got '1'"),
    ("jobs", ("waiting",), {"offset": -1}, r"offset must be an int >= 0, got -1"),
    ("jobs", ("waiting",), {"limit": 2.5}, r"limit must be an int in 1\.\.1000, got 2\.5"),
    ("jobs", ("active",), {"limit": 2.5}, r"limit must be an int in 1\.\.1000, got 2\.5"),
    ("jobs", ("active",), {"limit": "9"}, r"limit must be an int in 1\.\.1000, got '9'"),
    ("claim", (), {"count": 1.5}, r"count must be an int in 0\.\.1000, got 1\.5"),
    ("claim", (), {"count": True}, r"count must be an int in 0\.\.1000, got True"),
    ("retry_failed", (), {"batch": 1.5}, r"batch must be an int in 1\.\.1000, got 1\.5"),
    ("purge_failed", (), {"batch": "10"}, r"batch must be an int in 1\.\.1000, got '10'"),
    ("promote", (), {"batch": 2.5}, r"batch must be an int in 1\.\.100000, got 2\.5"),
    ("recover", (), {"batch": True}, r"batch must be an int in 1\.\.100000, got True"),
    ("trim", (), {"batch": "5"}, r"batch must be an int in 1\.\.100000, got '5'"),
]


async def test_paging_and_batch_counts_that_are_not_ints_are_refused_before_the_server(api):
    """Before, a float reached the server and failed with its error ('value is not an integer or out
    of range'), a string raised a TypeError from a comparison, and True was taken for 1 (claim(count=True)
    leased a job)."""
    q = api.queue()
    await q.enqueue_many([("t", 1), JobSpec("t", 2, delay=60), ("t", 3)])
    [leased] = await q.claim()
    snap, keys = api.snapshot(), api.all_keys()
    for method, args, kwargs, message in BAD_COUNTS:
        with pytest.raises(ValueError, match=message):
            await getattr(q, method)(*args, **kwargs)
    for claim in (1.5, True, "1"):
        with pytest.raises(ValueError, match=rf"claim must be an int in 0\.\.1000, got {claim!r}"):
            await q.ack(leased, claim=claim)
    assert api.snapshot() == snap and api.all_keys() <= keys
    assert await q.counts() == counts(waiting=1, delayed=1, active=1)
    assert [j.id for j in await q.jobs("waiting", offset=0, limit=1)]
    for state in ("waiting", "completed"):  # past every job: an empty page, not a server error
        assert await q.jobs(state, offset=2**64) == []
    await q.ack(leased)


@pytest.mark.parametrize("bad", ["", "a{b", "b}", "{x}"])
async def test_bad_queue_and_prefix_names_are_refused(api, bad):
    with pytest.raises(InvalidNameError, match="queue name"):
        api.queue(name=bad)
    with pytest.raises(InvalidNameError, match="prefix"):
        api.queue(prefix=bad)
    assert api.queue_keys(name=api.name) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_server_names_the_address_never_the_password(api):
    port = _free_port()
    q = api.queue(url=f"redis://alice:s3cr3t-pw@127.0.0.1:{port}/0", connect_timeout=1.0)
    for call in (lambda: q.enqueue("t", 1), q.claim, q.counts, lambda: q.get_job("x"), q.retry_failed,
                 q.purge_failed, lambda: q.jobs("failed"), lambda: q.cancel("x"), q.recover):
        t0 = time.monotonic()
        with pytest.raises(ConnectionFailedError) as info:
            await call()
        assert time.monotonic() - t0 < 5.0
        text = f"{info.value} {info.value!r}"
        assert f"127.0.0.1:{port}" in text
        assert "s3cr3t-pw" not in text
        assert "alice" not in text
        assert isinstance(info.value, ConnectionError)  # the builtin, for generic handlers


async def test_maxmemory_policy_warns_or_raises_in_strict_mode(api, caplog):
    assert api.admin.info()["maxmemory_policy"] == "noeviction"  # the launcher's setting
    caplog.set_level(logging.WARNING, logger="conveyor")

    quiet = api.queue()
    await quiet.counts()
    await quiet.enqueue("t", 1)
    assert not [r for r in caplog.records if "maxmemory" in r.getMessage()]
    if api.server.family == "dragonfly":
        pytest.skip("Dragonfly evicts only with --cache_mode=true, not by CONFIG SET maxmemory-policy; "
                    "the INFO parsing is unit-tested in tests/unit/test_server_differences.py")
    original = api.config("maxmemory-policy")

    api.admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        loose = api.queue(name=api.name + "-loose")
        job = await loose.enqueue("t", 1)
        await loose.enqueue("t", 2)
        warnings = [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]
        assert len(warnings) == 1, "warn once per queue, at start-up"
        assert warnings[0].levelno == logging.WARNING
        assert "allkeys-lru" in warnings[0].getMessage()
        assert "noeviction" in warnings[0].getMessage()
        assert (await loose.get_job(job.id)).state == "waiting"

        strict = api.queue(name=api.name + "-strict", strict=True)
        with pytest.raises(ServerConfigError, match="allkeys-lru"):
            await strict.enqueue("t", 1)
        with pytest.raises(ServerConfigError):
            await strict.claim()
        assert [k for k in api.queue_keys(name=api.name + "-strict") if b":j:" in k] == []
    finally:
        api.admin.config_set("maxmemory-policy", original)
    assert api.config("maxmemory-policy") == "noeviction"


async def test_pool_exhaustion_gives_a_clear_error(api):
    if api.driver == "glide":
        pytest.skip("glide multiplexes one connection per client: there is no pool to exhaust")
    q = api.queue(pool_size=1, pool_timeout=0.2)
    await q.enqueue("t", 1)  # start-up checks done; the one connection is back in the pool
    holder = asyncio.ensure_future(q.raw("blpop", [f"{api.name}-never"], timeout=1))
    await asyncio.sleep(0.15)
    t0 = time.monotonic()
    with pytest.raises(PoolExhaustedError) as info:
        await q.enqueue("t", 2)
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 0.8
    message = str(info.value)
    assert "all 1 connections" in message
    assert f"127.0.0.1:{api.server.port}" in message
    assert "pool_size" in message
    with pytest.raises(PoolExhaustedError):
        await q.counts()
    assert await holder is None
    assert await q.counts() == counts(waiting=1)  # usable again; the refused enqueue wrote nothing


async def test_queue_with_its_own_client(api):
    """Bring-your-own-client construction works like from_url."""
    if api.is_async:
        client = aredis.Redis(host=api.server.host, port=api.server.port)
        q = AsyncQueue(api.name, client, keep_completed=-1)
        await q.enqueue("t", 1)
        [job] = await q.claim()
        await q.ack(job)
        assert (await q.counts())["completed"] == 1
        await q.aclose()
    else:
        client = redis.Redis(host=api.server.host, port=api.server.port)
        q = Queue(api.name, client, keep_completed=-1)
        await asyncio.to_thread(q.enqueue, "t", 1)
        [job] = await asyncio.to_thread(q.claim)
        await asyncio.to_thread(q.ack, job)
        assert (await asyncio.to_thread(q.counts))["completed"] == 1
        q.close()


async def test_close_releases_the_connections(api):
    """close()/aclose() of a from_url queue closes its pool: no connection stays open."""

    def ids() -> set[int]:
        return {int(c["id"]) for c in api.admin.client_list()}

    before = ids()
    q = api.queue()
    await q.enqueue("t", 1)
    await q.counts()
    mine = ids() - before
    assert mine, "the queue opened a connection"
    await q.close()
    await wait_until(lambda: not (ids() & mine), timeout=2,
                     what=f"connections {sorted(mine)} to close after close()")


@pytest.mark.parametrize("path", ["x", "0x", "1/2"])
def test_a_url_whose_database_is_not_a_number_is_refused(server, queue_name, path):
    """redis-py reads no db from such a path: Queue.from_url, AsyncQueue.from_url and a Conveyor
    app's queues connected to db 0 without a word."""
    url = f"redis://{server.host}:{server.port}/{path}"
    builders = [
        lambda: Queue.from_url(url, queue_name),
        lambda: AsyncQueue.from_url(url, queue_name),
        lambda: Conveyor(url).queue(queue_name),
    ]
    for build in builders:
        with pytest.raises(InvalidNameError, match=rf"names database {path!r}: .* must be a database number"):
            build()
