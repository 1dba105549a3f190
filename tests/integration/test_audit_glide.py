"""Audit of the valkey-glide driver's parity with redis-py: each test failed before its fix."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conveyor import (
    AsyncQueue,
    ConnectionFailedError,
    ConveyorError,
    Job,
    PermissionDeniedError,
    PoolExhaustedError,
    Queue,
    QueueClosedError,
    ServerError,
    Worker,
    acl_rules,
)
from conveyor._glide_common import redis_error

from bench.servers import RunningServer


@pytest.fixture(autouse=True)
def _glide_installed(driver: str) -> None:
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")


def _user_url(server: RunningServer, rules: str) -> tuple[str, str]:
    """Create a user with ``rules``; return a URL logging in as it, and its password."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: ACL rules are checked on Redis and Valkey")
    name, password = f"cv-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", *rules.split())
    return f"redis://{name}:{password}@{server.host}:{server.port}/0", password


def test_a_user_refused_info_is_told_so_not_that_the_server_is_unreachable(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis-py reads INFO once per queue and, refused, only warns. glide sends INFO while it
    connects, so every call failed, as ConnectionFailedError 'cannot reach the server' (a worker
    retries that for ever): now PermissionDeniedError naming INFO, never the password."""
    url, password = _user_url(server, " ".join(r for r in acl_rules().split() if r != "+info"))
    queue = Queue.from_url(url, queue_name, driver=driver)
    try:
        if driver == "redis-py":
            assert queue.enqueue("t", 1).state == "waiting"
            return
        with pytest.raises(PermissionDeniedError, match=r"NOPERM.*the command 'INFO'") as caught:
            queue.enqueue("t", 1)
        assert password not in str(caught.value)
    finally:
        queue.close()


@pytest.mark.parametrize("option", ["ssl_ca_certs", "ssl_cert_reqs"])
def test_a_tls_option_on_a_plain_url_is_refused_by_name(redis_url: str, queue_name: str, driver: str,
                                                         option: str, tmp_path: Path) -> None:
    """redis-py refuses a TLS option on redis:// (no TLS); glide dropped it silently."""
    (tmp_path / "ca.pem").write_text("")
    value = tmp_path / "ca.pem" if option == "ssl_ca_certs" else "none"
    with pytest.raises(ConveyorError, match=option):
        Queue.from_url(f"{redis_url}?{option}={value}", queue_name, driver=driver)


def test_an_ssl_cert_reqs_glide_cannot_honour_is_refused_by_name(redis_url: str, queue_name: str,
                                                                 driver: str) -> None:
    """glide reads 'none' (no verification); any other value, a misspelt 'nnoe' too, verified the
    certificate in silence. 'required' and 'optional' (which a TLS client treats as required)
    verify, as with redis-py."""
    if driver != "glide":
        pytest.skip("redis-py reads the value itself")
    tls = redis_url.replace("redis://", "rediss://", 1)
    for accepted in ("required", "optional", "NONE"):
        Queue.from_url(f"{tls}?ssl_cert_reqs={accepted}", queue_name, driver=driver).close()
    with pytest.raises(ConveyorError, match=r"ssl_cert_reqs.*'nnoe'"):
        Queue.from_url(f"{tls}?ssl_cert_reqs=nnoe", queue_name, driver=driver)


async def test_more_calls_in_flight_than_glide_allows_are_refused_as_not_sent(
    redis_url: str, queue_name: str, driver: str
) -> None:
    """glide caps the calls in flight on one client (1000); the ones past it were a ServerError 'the
    server answered with an error: Reached maximum inflight requests', though the server never saw
    them. redis-py's pool queues callers (pool_timeout); glide's are PoolExhaustedError, not sent."""
    queue = AsyncQueue.from_url(redis_url, queue_name, driver=driver)
    try:
        job = await queue.enqueue("t", 1)
        replies = await asyncio.gather(*(queue.get_job(job.id) for _ in range(3000)), return_exceptions=True)
    finally:
        await queue.aclose()
    errors = [r for r in replies if not isinstance(r, Job)]
    assert all(isinstance(e, PoolExhaustedError) and "was not sent" in str(e) for e in errors), errors[:1]
    assert driver == "glide" or not errors


def test_an_idle_worker_stops_at_once_under_the_documented_rules(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """acl_rules() refuses CLIENT ID and CLIENT UNBLOCK, with which glide's close() ends a BZPOPMIN
    in progress: stop() took socket_timeout (10 s), and left the waiter's connection blocked and
    its thread alive until the block (30 s) ran out. redis-py closes the socket: at once."""
    url, _ = _user_url(server, acl_rules())
    queue = Queue.from_url(url, queue_name, driver=driver)
    worker = Worker(queue, {"t": lambda job: None}, block_timeout=30, install_signal_handlers=False)
    before = set(threading.enumerate())  # other tests of this process may leave their own waiters
    thread = threading.Thread(target=worker.run)
    thread.start()
    time.sleep(0.7)  # blocked in BZPOPMIN
    started = time.monotonic()
    worker.stop()
    thread.join(40)
    queue.close()
    assert time.monotonic() - started < 2.5
    waiters = [t for t in set(threading.enumerate()) - before if t.name == "conveyor-waiter"]
    for waiter in waiters:  # its blocked call ends as its socket closes: within a moment
        waiter.join(2.0)
    assert not [t.name for t in waiters if t.is_alive()]
    with server.client() as admin:
        blocked = [c for c in admin.client_list() if c.get("name", "").startswith(f"conveyor:{queue_name}:")]
    assert not blocked, blocked


def test_an_error_names_the_host_a_url_without_one_connects_to(driver: str) -> None:
    """redis://:port connects to localhost with either driver; glide's errors named 'None:port'."""
    queue = Queue.from_url("redis://:1/0", "q", driver=driver, connect_timeout=0.5)
    with pytest.raises(ConnectionFailedError, match=r"at localhost:1/0") as caught:
        queue.counts()
    queue.close()
    # one line (glide's messages ended with a newline, which split the worker's log lines)
    assert "\n" not in str(caught.value)


def _blocked_waiters(server: RunningServer, queue_name: str) -> list[dict]:
    with server.client() as admin:
        return [c for c in admin.client_list()
                if c.get("name") == f"conveyor:{queue_name}:waiter" and c.get("cmd") == "bzpopmin"]


def test_an_idle_worker_stops_at_once_after_its_wait_connection_was_replaced(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """glide's close() ends a BZPOPMIN with CLIENT UNBLOCK of the id it asked once; after glide
    reconnected (a server restart, here CLIENT KILL) that id was stale: stop() took socket_timeout
    (10 s) and left the new connection blocked until block_timeout (30 s) ran out."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: its CLIENT LIST shows no current command")
    queue = Queue.from_url(server.url, queue_name, driver=driver)
    worker = Worker(queue, {"t": lambda job: None}, block_timeout=30, install_signal_handlers=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not (first := _blocked_waiters(server, queue_name)) and time.monotonic() < deadline:
            time.sleep(0.05)
        with server.client() as admin:
            admin.client_kill_filter(_id=first[0]["id"])
        while time.monotonic() < deadline + 5:
            again = _blocked_waiters(server, queue_name)
            if again and again[0]["id"] != first[0]["id"]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the waiter did not block again on a new connection")
    finally:
        started = time.monotonic()
        worker.stop()
        thread.join(40)
        queue.close()
    assert time.monotonic() - started < 2.5
    assert not _blocked_waiters(server, queue_name)


def test_a_user_named_without_a_password_logs_in_as_that_user_or_is_refused(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis://user@host: redis-py logs in as that user (AUTH with an empty password, which a
    'nopass' user accepts). glide sends no AUTH for an empty password, so every call ran as the
    default user, whatever user the URL named (one that does not exist too)."""
    user = urlsplit(_user_url(server, "nopass +@all ~*")[0]).username
    url = f"redis://{user}@{server.host}:{server.port}/0"
    try:
        queue = Queue.from_url(url, queue_name, driver=driver)
    except ConveyorError as exc:
        assert driver == "glide" and "without a password" in str(exc) and user not in str(exc)
        return
    try:
        queue.counts()
        with server.client() as admin:
            assert any(c.get("user") == user for c in admin.client_list())
    finally:
        queue.close()


def test_a_closed_queue_used_again_says_it_was_closed(redis_url: str, queue_name: str, driver: str) -> None:
    """redis-py reopens a connection for a call after close(); glide's closed client made every such
    call ConnectionFailedError 'cannot reach the server', which a worker or a result wait retries for
    ever. Now a ConveyorError saying the queue was closed, never ConnectionFailedError."""
    queue = Queue.from_url(redis_url, queue_name, driver=driver, store_results=True)
    job = queue.enqueue("t", 1)
    queue.close()
    if driver == "redis-py":
        assert queue.enqueue("t", 2).state == "waiting"
        queue.close()
        return
    for call in (lambda: queue.enqueue("t", 2), lambda: job.result(timeout=1), queue.counts):
        with pytest.raises(ConveyorError, match=r"was closed") as caught:
            call()
        assert not isinstance(caught.value, ConnectionFailedError)


async def test_a_closed_async_queue_used_again_says_it_was_closed(
    redis_url: str, queue_name: str, driver: str
) -> None:
    """The asyncio twin: glide's 'Unable to execute requests; the client is closed' was
    ConnectionFailedError 'cannot reach the server'; a queue closed before its first call connected
    anew."""
    opened = AsyncQueue.from_url(redis_url, queue_name, driver=driver)
    await opened.enqueue("t", 1)
    never_used = AsyncQueue.from_url(redis_url, queue_name, driver=driver)
    for queue in (opened, never_used):
        await queue.aclose()
        if driver == "redis-py":
            assert (await queue.enqueue("t", 2)).state == "waiting"
            await queue.aclose()
            continue
        with pytest.raises(ConveyorError, match=r"was closed") as caught:
            await queue.enqueue("t", 2)
        assert not isinstance(caught.value, ConnectionFailedError)


def _refusing_port() -> int:
    """A local port nothing listens on (bound once to pick it, then freed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_is_reported_as_refused_at_once(driver: str) -> None:
    """redis-py fails at once with 'Connection refused'; glide retried the refused connect until
    connect_timeout (5 s) and reported 'timed out'."""
    url = f"redis://127.0.0.1:{_refusing_port()}/0"
    # (redis-py's asyncio connection says 'Connect call failed' for a refusal)
    refused = r"(?i)cannot reach .*connection refused" + ("" if driver == "glide" else "|Connect call failed")
    for queue in (Queue.from_url(url, "q", driver=driver), AsyncQueue.from_url(url, "q", driver=driver)):
        started = time.monotonic()
        with pytest.raises(ConnectionFailedError, match=refused):
            result = queue.counts()
            if asyncio.iscoroutine(result):
                await result
        assert time.monotonic() - started < 2.0
        if isinstance(queue, AsyncQueue):
            await queue.aclose()
        else:
            queue.close()


def test_a_db_index_out_of_range_is_named(server: RunningServer, queue_name: str, driver: str) -> None:
    """redis-py: ServerError 'DB index is out of range', at once. glide retried the refused SELECT
    until connect_timeout (5 s): ConnectionFailedError 'cannot reach the server ... timed out'."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: checked on Redis and Valkey (16 databases)")
    queue = Queue.from_url(f"redis://{server.host}:{server.port}/99", queue_name, driver=driver)
    started = time.monotonic()
    with pytest.raises(ServerError, match=r"DB index.* out of range"):
        queue.enqueue("t", 1)
    assert time.monotonic() - started < 2.0
    queue.close()


async def test_a_user_refused_select_is_told_so_as_with_redis_py(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis-py: PermissionDeniedError naming SELECT for a URL's DB index the ACL refuses. glide's
    connect says only 'refused to switch database': it was ServerError 'DB index is out of range, or
    SELECT is refused', for either cause."""
    url, password = _user_url(server, "+@all -select ~*")
    url = url.removesuffix("/0") + "/1"
    for queue in (Queue.from_url(url, queue_name, driver=driver),
                  AsyncQueue.from_url(url, queue_name, driver=driver)):
        with pytest.raises(PermissionDeniedError, match=r"NOPERM.*'SELECT'") as caught:
            reply = queue.counts()
            if asyncio.iscoroutine(reply):
                await reply
        assert password not in str(caught.value)
        if isinstance(queue, AsyncQueue):
            await queue.aclose()
        else:
            queue.close()


@pytest.mark.parametrize("content", ["", "not a certificate\n"])
def test_a_ca_file_without_a_certificate_is_refused_by_name(redis_url: str, queue_name: str, driver: str,
                                                            content: str, tmp_path: Path) -> None:
    """redis-py fails to connect ('no certificate or crl found'). With glide an empty file was a bare
    redis ResponseError out of Queue.from_url (an AsyncQueue's first call: ServerError 'the server
    answered with an error', though no server was asked), and a file of no PEM certificate
    'cannot reach the server: timed out' after connect_timeout."""
    (tmp_path / "ca.pem").write_text(content)
    url = f"{redis_url.replace('redis://', 'rediss://', 1)}?ssl_ca_certs={tmp_path / 'ca.pem'}"
    if driver == "redis-py":
        queue = Queue.from_url(url, queue_name, driver=driver)
        with pytest.raises(ConnectionFailedError, match="no certificate"):
            queue.counts()
        queue.close()
        return
    with pytest.raises(ConveyorError, match=r"ssl_ca_certs names .*ca\.pem, which holds no PEM certificate"):
        Queue.from_url(url, queue_name, driver=driver)


async def test_the_longest_timeouts_settings_accept_work_with_either_driver(
    redis_url: str, queue_name: str, driver: str
) -> None:
    """QueueSettings takes timeouts up to 1e9 s; glide holds at most 2**32-1 ms (~49.7 days) and
    refused more: a bare redis.exceptions.ResponseError 'Value out of range' out of Queue.from_url,
    and for an AsyncQueue ServerError 'the server answered with an error', no server asked."""
    settings = {"socket_timeout": 1e9, "connect_timeout": 1e9}
    queue = Queue.from_url(redis_url, queue_name, driver=driver, **settings)
    assert queue.counts()["waiting"] == 0
    queue.close()
    async_queue = AsyncQueue.from_url(redis_url, queue_name, driver=driver, **settings)
    assert (await async_queue.counts())["waiting"] == 0
    await async_queue.aclose()


def test_a_configuration_glide_refuses_is_not_reported_as_a_server_reply(driver: str) -> None:
    """Any configuration glide itself refuses (here a request timeout past its u32 of ms) was mapped
    to a ResponseError: ServerError 'the server answered with an error', though no server was asked."""
    if driver != "glide":
        pytest.skip("glide's own refusals")
    glide_sync = pytest.importorskip("glide_sync")
    config = glide_sync.GlideClientConfiguration(
        [glide_sync.NodeAddress("127.0.0.1", 1)], request_timeout=2**32, lazy_connect=True
    )
    with pytest.raises(Exception) as caught:  # glide's own class, mapped below
        glide_sync.GlideClient.create(config)
    mapped = redis_error(caught.value)
    assert type(mapped) is ConveyorError and "driver 'glide' refused" in str(mapped)


def test_a_url_naming_port_0_does_not_connect_to_6379(driver: str) -> None:
    """redis-py connects to the port written, 0 (refused); glide read port 0 as 'no port' and used
    the default 6379: a server listening there would have served the queue in silence."""
    queue = Queue.from_url("redis://127.0.0.1:0/0", "q", driver=driver, connect_timeout=2)
    with pytest.raises(ConnectionFailedError, match=r"at 127\.0\.0\.1:0/0"):
        queue.counts()
    queue.close()


def test_a_server_error_reply_is_quoted_as_the_server_wrote_it(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis-py quotes a reply such as 'WRONGTYPE Operation against a key ...' as written; glide
    put a colon after the code ('WRONGTYPE: Operation ...'), so logs and searches differed."""
    queue = Queue.from_url(server.url, queue_name, driver=driver)
    job = queue.enqueue("t", 1)
    with server.client() as admin:
        admin.delete(queue.core.keys.job(job.id))
        admin.set(queue.core.keys.job(job.id), "not a hash")
    with pytest.raises(ServerError, match=r"answered with an error: WRONGTYPE Operation against a key"):
        queue.get_job(job.id)
    queue.close()


def test_a_failed_pipeline_names_the_failing_command(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis-py names a pipeline's failing command ('Command # 2 (HGETALL ...) of pipeline caused
    error: WRONGTYPE ...'); glide gave the bare server reply, so which of the calls failed was lost."""
    queue = Queue.from_url(server.url, queue_name, driver=driver)
    jobs = [queue.enqueue("t", n, job_id=f"payload-{n}") for n in range(3)]
    with server.client() as admin:
        admin.delete(queue.core.keys.job(jobs[1].id))
        admin.set(queue.core.keys.job(jobs[1].id), "not a hash")
    try:
        failed = r"Command # 2 \(HGETALL.*\) of pipeline caused error: WRONGTYPE"
        with pytest.raises(ServerError, match=failed):
            queue.jobs("waiting")
    finally:
        queue.close()


async def test_an_async_call_in_flight_at_aclose_says_the_queue_was_closed(
    redis_url: str, queue_name: str, driver: str
) -> None:
    """A call glide still had in flight when aclose() closed its client failed as ConnectionFailedError
    'cannot reach the server ... the client is closed', which callers retry for ever: now the same
    ConveyorError as a call made after aclose(). get_job only reads: maybe_applied False, nothing
    was changed (test_read_at_close.py)."""
    queue = AsyncQueue.from_url(redis_url, queue_name, driver=driver)
    job = await queue.enqueue("t", 1)
    calls = [asyncio.ensure_future(queue.get_job(job.id)) for _ in range(200)]
    await asyncio.sleep(0)  # sent, not answered
    await queue.aclose()
    replies = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)
    errors = [r for r in replies if not isinstance(r, Job)]
    # redis-py answers most of them before its connections close (its were ConnectionFailedError)
    assert errors or driver == "redis-py", "no call was still in flight at aclose()"
    for error in errors:
        assert isinstance(error, QueueClosedError) and not error.maybe_applied, error
        assert "was closed" in str(error) and "nothing was changed" in str(error)


async def test_a_server_at_maxclients_is_named_as_the_likely_cause(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """redis-py reports the server's 'max number of clients reached'; glide said only 'Multiplexed
    connection driver unexpectedly terminated- IoError', which names no cause. glide drops the
    server's reply or reads it, as the close and the reply reach it: either way the message
    names the cause (the server's words, or maxclients as the likely cause quoting them)."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: checked on Redis and Valkey")
    with server.client() as admin:
        before = admin.config_get("maxclients")["maxclients"]
        # 1, not the count of clients connected now: this admin's connection alone fills it, so
        # every new connection is refused even if a client of an earlier test leaves meanwhile
        admin.config_set("maxclients", 1)
        try:
            for queue in (Queue.from_url(server.url, queue_name, driver=driver),
                          AsyncQueue.from_url(server.url, queue_name, driver=driver)):
                with pytest.raises(ConnectionFailedError, match="max number of clients reached"):
                    reply = queue.counts()
                    if asyncio.iscoroutine(reply):
                        await reply
                if isinstance(queue, AsyncQueue):
                    await queue.aclose()
                else:
                    queue.close()
        finally:
            admin.config_set("maxclients", before)
