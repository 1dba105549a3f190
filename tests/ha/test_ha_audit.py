"""Audit of high availability: failovers with jobs in flight, and bad Sentinel input."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from _ha import started
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    ConveyorError,
    CredentialsRefusedError,
    InvalidNameError,
    JobSpec,
    Queue,
    ReplicationError,
    ServerError,
    Worker,
)
from redis.cluster import key_slot

from bench.topologies import SERVICE, Cluster, SentinelGroup, start_sentinel_group, wait_until


@pytest.fixture
def fresh_sentinels() -> Iterator[SentinelGroup]:
    yield from started(start_sentinel_group)


async def test_async_queue_without_reachable_sentinels_says_so_briefly() -> None:
    """redis.asyncio's MasterNotFoundError is its own class: the async twin's error was 'cannot
    reach the server ...' quoting redis-py's message whole, the repr of every Sentinel's client,
    pool and connection (2,400 characters for two Sentinels), where the sync twin names the
    service, then each Sentinel with its reason."""
    url = "redis+sentinel://user:s3cret@127.0.0.1:1,127.0.0.1:2/svc"
    queue = AsyncQueue.from_url(url, "q", connect_timeout=0.5)
    with pytest.raises(ConnectionFailedError) as info:
        await queue.enqueue("t", 1)
    message = str(info.value)
    assert message.startswith("no primary for Sentinel service 'svc'"), message
    assert "127.0.0.1:1" in message and "127.0.0.1:2" in message, message
    assert "<redis." not in message and "s3cret" not in message and len(message) < 400, message
    await queue.aclose()


async def test_async_queue_with_an_unknown_service_says_no_sentinel_knows_it(
    sentinels: SentinelGroup,
) -> None:
    hosts = ",".join(f"{h}:{p}" for h, p in sentinels.sentinel_addresses)
    queue = AsyncQueue.from_url(f"redis+sentinel://{hosts}/no-such-service", "q")
    with pytest.raises(ConnectionFailedError) as info:
        await queue.enqueue("t", 1)
    message = str(info.value)
    assert message.startswith("no primary for Sentinel service 'no-such-service'"), message
    assert "no Sentinel reports a primary that is up" in message, message
    await queue.aclose()


def _migrating(cluster: Cluster, name: str) -> tuple[Any, Any, int]:
    """Put queue ``name``'s slot in the MIGRATING/IMPORTING state of a reshard (no key moved)."""
    slot = key_slot(name.encode())
    source = cluster.owner(slot)
    target = next(s[0] for s in cluster.shards if s[0] is not source and s[0].running)
    ids = {}
    for node in (source, target):
        with node.client() as client:
            ids[node.port] = client.execute_command("CLUSTER", "MYID").decode()
    with source.client() as src, target.client() as dst:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source.port])
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target.port])
    return source, target, slot


def _stable(source: Any, target: Any, slot: int) -> None:
    """End the reshard without moving anything: the slot stays with its owner."""
    for node in (source, target):
        with node.client() as client:
            client.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_call_refused_for_a_migrating_slot_says_it_did_not_run(
    cluster: Cluster, surface: str
) -> None:
    """While a queue's slot is being resharded (MIGRATING), every script call of the queue is
    refused with TRYAGAIN (its key prefixes, never real keys, count as missing keys). Without
    wait_replicas a lone call goes through redis-py's cluster client, which gives up after about
    0.4 s: the error read 'Redis Cluster via ...: TTL exhausted.', which says neither why nor that
    the enqueue did not run (a caller without a job_id cannot tell whether to send it again)."""
    name = f"audit-migrating-{surface}"
    queue: Any = (Queue if surface == "sync" else AsyncQueue).from_url(cluster.url, name)

    async def enqueue() -> Any:
        return queue.enqueue("t", 1) if surface == "sync" else await queue.enqueue("t", 1)

    await enqueue()
    source, target, slot = _migrating(cluster, name)
    try:
        with pytest.raises(ConnectionFailedError) as info:
            await enqueue()
    finally:
        _stable(source, target, slot)
    message = str(info.value)
    assert "TRYAGAIN" in message and "did not run" in message, message
    assert (await enqueue()).created
    counts = queue.counts() if surface == "sync" else await queue.counts()
    assert counts["waiting"] == 2
    queue.close() if surface == "sync" else await queue.aclose()


def _named_primary(sentinel: Any) -> int:
    """The primary's port as redis-py reads it (SENTINEL MASTERS, which names the old primary
    while that Sentinel's failover is still in progress)."""
    with sentinel.client(socket_timeout=2) as client:
        return int(client.sentinel_masters()[SERVICE]["port"])


def _fail_over_while_paused(group: SentinelGroup) -> None:
    """Freeze the primary (a paused VM, a stalled host) until the Sentinels promoted a replica and
    moved the other one to it, then let it run again: it is a primary still, with no replica,
    until Sentinel demotes it."""
    old = group.primary()
    os.kill(old.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        wait_until(lambda: group.primary() is not old, "the failover", 60)
        new = group.primary()
        with new.client() as client:
            wait_until(lambda: client.info("replication")["connected_slaves"] >= 1, "the replica to move")
        wait_until(lambda: all(_named_primary(s) == new.port for s in group.sentinels), "every Sentinel")
    finally:
        os.kill(old.pid, signal.SIGCONT)  # type: ignore[arg-type]


async def _refused_until_through(call: Callable[[], Awaitable[Any]]) -> list[str]:
    """Send ``call`` until it goes through; what refused it meanwhile, and when. (A primary that
    could not replicate: ReplicationError, or ServerError NOREPLICAS; ConnectionFailedError once
    Sentinel demoted it at last.)"""
    refused: list[str] = []
    began = time.monotonic()
    while True:
        try:
            await call()
            return refused
        except (ReplicationError, ServerError, ConnectionFailedError) as exc:
            refused.append(f"{time.monotonic() - began:.1f} s: {exc}")
        assert time.monotonic() - began < 60


@pytest.mark.parametrize(
    ("surface", "guard"), [("sync", "wait"), ("async", "wait"), ("sync", "min-replicas")]
)
async def test_a_primary_back_from_a_pause_after_its_failover_does_not_hold_the_queue(
    fresh_sentinels: SentinelGroup, surface: str, guard: str
) -> None:
    """redis-py asks the Sentinels for the primary only when it opens a connection: a pooled one
    to a primary that was failed over while paused went on to it once it ran again, and every
    enqueue raised ReplicationError (wait_replicas) or ServerError NOREPLICAS (the server's
    min-replicas-to-write), no replica being left, until Sentinel demoted it about 10 s later,
    while the new primary was up. A write the primary could not replicate now asks the
    Sentinels, so the next call goes to the new primary."""
    group = fresh_sentinels
    if guard == "min-replicas":
        for server in group.servers:
            with server.client() as client:
                client.config_set("min-replicas-to-write", 1)
    cls: Any = Queue if surface == "sync" else AsyncQueue
    wait = 1 if guard == "wait" else 0
    queue = cls.from_url(group.url, f"paused-{surface}", wait_replicas=wait, wait_timeout=0.5)

    async def enqueue(job_id: str) -> Any:
        call = queue.enqueue("t", job_id, job_id=job_id)
        return await call if surface == "async" else call

    await enqueue("before")
    await asyncio.to_thread(_fail_over_while_paused, group)
    refused = await _refused_until_through(lambda: enqueue("after"))
    assert len(refused) <= 1, refused
    with group.primary().client() as client:
        assert client.exists(queue.core.keys.job("after"))
    queue.close() if surface == "sync" else await queue.aclose()


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_sentinels_that_require_a_password_are_named_as_the_cause(
    fresh_sentinels: SentinelGroup, surface: str
) -> None:
    """A redis+sentinel URL's credentials go to the data nodes only. Sentinels that require a
    password each answered 'auth:AuthenticationError: HELLO must be called with the client
    already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to
    ...' (cut at 200 characters), which names neither the Sentinels' password as the cause nor
    how to give it."""
    group = fresh_sentinels
    for sentinel in group.sentinels:
        with sentinel.client() as client:
            client.execute_command("ACL", "SETUSER", "default", "resetpass", ">sentinel-secret")
    queue: Any = (Queue if surface == "sync" else AsyncQueue).from_url(group.url, "auth")
    with pytest.raises(ConnectionFailedError) as info:
        await (asyncio.to_thread(queue.enqueue, "t", 1) if surface == "sync" else queue.enqueue("t", 1))
    message = str(info.value)
    assert "Sentinels refused" in message and "sentinel_kwargs" in message, message
    assert isinstance(info.value, CredentialsRefusedError)
    queue.close() if surface == "sync" else await queue.aclose()


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_an_idle_worker_waits_out_a_failover_without_spinning(
    fresh_sentinels: SentinelGroup, caplog: pytest.LogCaptureFixture, surface: str
) -> None:
    """The waiter (BZPOPMIN on its own connection) retried a lost server every 25 to 50 ms, for
    as long as the failover lasted (Sentinel's down-after-milliseconds, 30 s by default): each
    retry asks a Sentinel for the primary, then connects, so every idle worker sent some 25
    Sentinel queries and connection attempts a second, while the pump backed off. It backs off
    too now, and the worker still picks up a job soon after the failover."""
    group = fresh_sentinels
    queue = Queue.from_url(group.url, f"idle-failover-{surface}")
    done: list[str] = []
    caplog.set_level(logging.DEBUG, logger="conveyor.worker")
    if surface == "sync":
        worker: Any = Worker(queue, {"t": lambda job: done.append(job.id)}, install_signal_handlers=False)
        running: Any = asyncio.ensure_future(asyncio.to_thread(worker.run))
    else:
        async def handle(job: Any) -> None:
            done.append(job.id)

        worker = AsyncWorker(AsyncQueue.from_url(group.url, queue.name), {"t": handle},
                             install_signal_handlers=False)  # fmt: skip
        running = asyncio.ensure_future(worker.run())
    try:
        await asyncio.sleep(1.0)  # idle, blocked in BZPOPMIN
        old = group.primary()
        killed = time.monotonic()
        old.kill()
        await asyncio.to_thread(wait_until, lambda: group.primary() is not old, "the failover", 60)
        outage = time.monotonic() - killed
        retries = [r for r in caplog.records if r.getMessage().startswith("idle wait interrupted")]
        assert len(retries) <= 6 + outage, f"{len(retries)} retries in {outage:.1f} s"
        job = await asyncio.to_thread(_enqueue_when_possible, queue)
        await asyncio.to_thread(wait_until, lambda: job.id in done, "the job to run", 15)
    finally:
        worker.stop()
        await asyncio.wait_for(running, 30)
    queue.close()


def _enqueue_when_possible(queue: Queue) -> Any:
    for _ in range(100):
        with contextlib.suppress(ConnectionFailedError):
            return queue.enqueue("t", None, job_id="after-failover")
        time.sleep(0.1)
    raise AssertionError("no enqueue went through after the failover")


async def test_the_result_reader_logs_a_lost_sentinel_group_in_one_readable_line(
    fresh_sentinels: SentinelGroup, caplog: pytest.LogCaptureFixture
) -> None:
    """The result reader logged redis-py's exception as it was: with no Sentinel reachable, the
    asyncio client's MasterNotFoundError quotes the repr of every Sentinel's client, pool and
    connection, some 1,200 characters a Sentinel, in a warning repeated at every retry."""
    group = fresh_sentinels
    queue = AsyncQueue.from_url(group.url, "reader-lost", store_results=True, connect_timeout=0.5)
    job = await queue.enqueue("t", None, delay=60)
    waiting = asyncio.ensure_future(queue.result(job.id, 4))
    await asyncio.sleep(0.5)  # the reader blocks in XREAD
    for sentinel in group.sentinels:
        sentinel.stop()
    group.servers[0].kill()
    with pytest.raises(TimeoutError):
        await waiting
    lines = [r.getMessage() for r in caplog.records if "result reader" in r.getMessage()]
    assert any("no primary for Sentinel service" in line for line in lines), lines
    assert not [line for line in lines if "<redis." in line or len(line) > 600], lines
    await queue.aclose()


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_wrong_cluster_password_is_named_as_refused_credentials(
    cluster: Cluster, surface: str
) -> None:
    """Cluster nodes refusing the URL's password ended in ConnectionFailedError 'Redis Cluster
    via ...: Redis Cluster cannot be connected. Please provide at least one reachable node:
    invalid username-password pair ...', where one server's refusal is CredentialsRefusedError
    telling to check the URL's user and password (and a worker logs 'call refused by the server',
    not 'lost the server')."""
    for node in cluster.nodes:
        with node.client() as client:
            client.acl_setuser("audit-user", enabled=True, passwords=["+right"], commands=["+@all"])
    hosts = ",".join(f"{n.host}:{n.port}" for n in cluster.nodes)
    url = f"redis+cluster://audit-user:s3cret-wrong@{hosts}"
    try:
        with pytest.raises(ConnectionFailedError) as info:
            if surface == "sync":
                Queue.from_url(url, "q").enqueue("t", 1)
            else:
                queue = AsyncQueue.from_url(url, "q")
                try:
                    await queue.enqueue("t", 1)
                finally:
                    await queue.aclose()
    finally:
        for node in cluster.nodes:
            with node.client() as client:
                client.acl_deluser("audit-user")
    message = str(info.value)
    assert isinstance(info.value, CredentialsRefusedError), message
    assert "refused the credentials" in message and "reachable node" not in message, message
    assert "s3cret" not in message and "127.0.0.1:" in message, message


def test_a_call_whose_connection_dropped_after_it_was_sent_may_have_been_applied(
    sentinels: SentinelGroup,
) -> None:
    """A primary that dies or closes a connection (a failover's CLIENT KILL, a SIGKILL) after an
    enqueue was sent left 'cannot reach the server ...: Connection closed by server.', which reads
    as 'not applied': a producer re-sending an enqueue_many of generated ids then stores it twice
    if the first had run. The message says now that it may have been applied or not."""
    queue = Queue.from_url(sentinels.url, "dropped-mid-call")
    queue.enqueue("t", 0)  # connected
    errors: list[BaseException] = []

    def enqueue() -> None:
        try:
            queue.enqueue_many([("t", i) for i in range(3)])
        except ConnectionFailedError as exc:
            errors.append(exc)

    with sentinels.primary().client() as admin:
        admin.execute_command("CLIENT", "PAUSE", 5000, "WRITE")  # the call waits, sent
        thread = threading.Thread(target=enqueue)
        try:
            thread.start()

            def sent() -> list[Any]:
                return [c for c in admin.client_list() if c.get("cmd") == "evalsha"]

            wait_until(lambda: bool(sent()), "the call to be sent", 10)
            admin.client_kill_filter(_id=sent()[0]["id"])
        finally:
            admin.execute_command("CLIENT", "UNPAUSE")
            thread.join(10)
    assert errors, "the enqueue did not fail"
    message = str(errors[0])
    assert "may have been applied or not" in message and "job_id" in message, message
    queue.close()


def _node_id(node: Any) -> str:
    with node.client() as client:
        return str(client.execute_command("CLUSTER", "MYID").decode())


def test_acl_rules_are_enough_on_a_cluster(cluster: Cluster) -> None:
    """high-availability.md says Cluster needs acl_rules() on every node; they lacked what
    redis-py's cluster client sends itself: CLUSTER SLOTS (the slot map), COMMAND (its key
    parser) and ASKING (a key of a slot being migrated). Such a user got 'Redis Cluster cannot be
    connected. Please provide at least one reachable node: Cluster mode is not enabled on this
    node' (the NOPERM on CLUSTER SLOTS, read as a server without cluster mode)."""
    from conveyor import acl_rules  # noqa: PLC0415

    for node in cluster.nodes:
        with node.client() as client:
            client.execute_command("ACL", "SETUSER", "audit-acl", "on", ">pw", *acl_rules().split())
    hosts = ",".join(f"{n.host}:{n.port}" for n in cluster.nodes)
    name = "audit-acl-cluster"
    try:
        queue = Queue.from_url(f"redis+cluster://audit-acl:pw@{hosts}", name)
        queue.enqueue("t", 1)
        worker = Worker(queue, {"t": lambda job: None}, burst=True, install_signal_handlers=False)
        assert worker.run()["processed"] == 1
        source, target, slot = _migrating(cluster, name)
        with source.client() as src:  # the queue's meta key has moved: reading it is an ASK
            src.execute_command("MIGRATE", target.host, target.port, queue.core.keys.meta, 0, 5000)
            assert queue.counts()["total_completed"] == 1
            while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        for node in (target, source):
            with node.client() as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", _node_id(target))
        queue.close()
    finally:
        for node in cluster.nodes:
            with node.client() as client:
                client.acl_deluser("audit-acl")


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_enqueue_many_to_follows_a_new_primary_after_a_write_it_could_not_replicate(
    fresh_sentinels: SentinelGroup, surface: str
) -> None:
    """As test_a_primary_back_from_a_pause_after_its_failover_does_not_hold_the_queue, for
    enqueue_many_to, whose pipeline does not go through the single-queue call path: its
    ReplicationError did not make the client ask the Sentinels, so it went on to the old primary
    until Sentinel demoted it."""
    group = fresh_sentinels
    cls: Any = Queue if surface == "sync" else AsyncQueue
    queue = cls.from_url(group.url, f"fan-{surface}", wait_replicas=1, wait_timeout=0.5)

    async def fan_out(job_id: str) -> Any:
        batches = {f"fan-{surface}-{i}": [JobSpec("t", i, job_id=job_id)] for i in range(2)}
        call = queue.enqueue_many_to(batches)
        return await call if surface == "async" else call

    await fan_out("before")
    await asyncio.to_thread(_fail_over_while_paused, group)
    refused = await _refused_until_through(lambda: fan_out("after"))
    assert len(refused) <= 1, refused
    queue.close() if surface == "sync" else await queue.aclose()


def test_waiting_for_a_job_a_failover_lost_names_that_cause(fresh_sentinels: SentinelGroup) -> None:
    """An enqueue acknowledged by a primary that died before a replica had it is gone after the
    failover (high-availability.md). Waiting for its result said 'has no stored result (no such
    job): it expired (result_ttl), retention removed it, or the job finished while store_results
    was off', none of which happened."""
    group = fresh_sentinels
    queue = Queue.from_url(group.url, "lost-result", store_results=True)
    queue.enqueue("t", 0)
    old = group.primary()
    replicas = [s for s in group.servers if s is not old]
    for replica in replicas:
        os.kill(replica.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    try:
        with old.client() as client:
            client.execute_command("CLIENT", "KILL", "TYPE", "replica")
        job = queue.enqueue("t", 1)  # acknowledged, on the primary alone
        old.kill()
    finally:
        for replica in replicas:
            os.kill(replica.pid, signal.SIGCONT)  # type: ignore[arg-type]
    wait_until(lambda: group.primary() is not old, "the failover", 60)
    for _ in range(100):
        with contextlib.suppress(ConnectionFailedError):
            queue.counts()
            break
        time.sleep(0.1)
    with pytest.raises(ConveyorError) as info:
        queue.result(job.id, 5)
    message = str(info.value)
    assert "no such job" in message and "failover" in message, message
    queue.close()


@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_misspelt_service_name_is_named_as_a_likely_cause(
    sentinels: SentinelGroup, surface: str
) -> None:
    """Every Sentinel answered, none with a primary for the service: the error said only 'no
    Sentinel reports a primary that is up for this service', which sends an operator to check
    the primary, where a misspelt service name (not one the Sentinels monitor) reads the same."""
    hosts = ",".join(f"{h}:{p}" for h, p in sentinels.sentinel_addresses)
    url = f"redis+sentinel://{hosts}/{SERVICE}-typo"
    queue: Any = (Queue if surface == "sync" else AsyncQueue).from_url(url, "q")
    with pytest.raises(ConnectionFailedError) as info:
        await (asyncio.to_thread(queue.enqueue, "t", 1) if surface == "sync" else queue.enqueue("t", 1))
    message = str(info.value)
    assert "service name" in message and "sentinel monitor" in message, message
    queue.close() if surface == "sync" else await queue.aclose()


def test_a_write_to_a_demoted_primary_says_it_was_refused_not_unreachable(
    fresh_sentinels: SentinelGroup,
) -> None:
    """A primary demoted under a client (a switchover, or its return after a failover) answers a
    write READONLY; redis-py turns that into 'The previous master is now a slave' and Conveyor
    said 'cannot reach the server at ...', though the server answered and the call was refused
    whole: unlike a lost connection, it is safe to send again, generated ids included."""
    group = fresh_sentinels
    queue = Queue.from_url(group.url, "demoted")
    queue.enqueue("t", 0)  # a pooled connection to the primary
    old, new = group.primary(), next(s for s in group.servers if s is not group.primary())
    with new.client() as client:
        client.execute_command("REPLICAOF", "NO", "ONE")
    with old.client() as client:
        client.execute_command("REPLICAOF", new.host, new.port)
    with pytest.raises(ConnectionFailedError) as info:
        queue.enqueue("t", 1)
    message = str(info.value)
    assert "no longer the primary" in message and "not applied" in message, message
    queue.close()


@pytest.mark.parametrize("option", ["sentinel_password", "sentinel_username"])
def test_a_sentinel_option_in_the_url_points_to_a_client_not_to_the_data_nodes_password(
    option: str,
) -> None:
    """A URL option for the Sentinels themselves was refused as 'has option 'sentinel_password'
    (did you mean 'password'?)', which sends the Sentinels' password to the data nodes."""
    with pytest.raises(InvalidNameError) as info:
        Queue.from_url(f"redis+sentinel://127.0.0.1:1/svc?{option}=s3cret", "q")
    message = str(info.value)
    assert "did you mean" not in message and "sentinel_kwargs" in message, message


@pytest.mark.parametrize("option", ["sentinel_username", "sentinel_auth", "x_token"])
def test_a_refused_credential_option_is_not_echoed(option: str) -> None:
    """Credential options are hidden in the errors that quote a URL, but only 'password' matched
    with a prefix (ssl_password, sentinel_password): 'sentinel_username=<value>' and the like were
    quoted as written."""
    with pytest.raises(InvalidNameError) as info:
        Queue.from_url(f"redis+sentinel://127.0.0.1:1/svc?{option}=s3cret", "q")
    assert "s3cret" not in str(info.value), info.value
