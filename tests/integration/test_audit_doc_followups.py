"""Follow-ups of the documentation audit: claims the pages made that the code did not keep, and
inputs the reference did not refuse. Each test failed before its fix (or pins what a page says)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import pickle
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from _support import api_fixture, wait_until  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import (
    AsyncQueue,
    Conveyor,
    InvalidNameError,
    PoolExhaustedError,
    Queue,
    ServerConfigError,
)

SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]


def _client(api, **options):
    cls = aredis.Redis if api.is_async else redis.Redis
    return cls.from_url(api.server.url, **options)


async def _close(api, client) -> None:
    if api.is_async:
        await client.aclose()
    else:
        client.close()


@pytest.mark.parametrize("decode", [True, False])
async def test_a_client_with_an_encoding_other_than_utf8_is_refused(api, decode):
    """A client built with encoding='latin-1' corrupted text: with decode_responses a payload
    'Zoë' came back as 'ZoÃ«' (its UTF-8 bytes read as latin-1, re-encoded as UTF-8), and without
    it a task name 'café' was sent as latin-1 and its claim failed to decode. Conveyor stores text
    as UTF-8: the queue now refuses such a client, naming the encoding."""
    client = _client(api, decode_responses=decode, encoding="latin-1")
    try:
        with pytest.raises(ValueError, match=r"encoding 'latin-1'.*UTF-8"):
            (AsyncQueue if api.is_async else Queue)(api.name, client)
    finally:
        await _close(api, client)


async def test_a_client_decoding_utf8_replies_keeps_text_intact(api):
    """The other side of the refusal: decode_responses with UTF-8 (spelled 'utf8') still works."""
    client = _client(api, decode_responses=True, encoding="utf8")
    q = (AsyncQueue if api.is_async else Queue)(api.name, client, store_results=True)
    try:
        adapter = api.queue()
        adapter.inner = q
        job = await adapter.enqueue("café", {"name": "Zoë"})
        [claimed] = await adapter.claim()
        assert (claimed.task, claimed.payload) == ("café", {"name": "Zoë"})
        assert (await adapter.get_job(job.id)).payload == {"name": "Zoë"}
        await adapter.ack(claimed, result="Zoë")
        assert await adapter.result(job.id, timeout=5) == "Zoë"
    finally:
        await adapter.close()


@pytest.mark.parametrize("option", ["name", "queue"])
def test_an_empty_task_name_or_queue_is_refused_not_replaced(redis_url, option):
    """app.task(name="") registered the task under the function's name, and queue="" sent its
    jobs to the default queue: an empty string is a bad value, not "use the default"."""
    app = Conveyor(redis_url)

    def send_mail() -> None: ...

    with pytest.raises(InvalidNameError, match="must not be empty"):
        app.task(**{option: ""})(send_mail)
    assert app.tasks == {}


@pytest.mark.parametrize("given", [42, "send_mail", functools.partial(print)])
def test_a_task_given_something_not_callable_says_so(redis_url, given):
    """app.task(42) raised AttributeError ("'int' object has no attribute '__name__'"), and
    app.task("send_mail"), a name given positionally, the same for 'str', and a callable without
    a __name__ (a functools.partial) too: a TypeError now names the problem and the keyword for a
    name."""
    app = Conveyor(redis_url)
    with pytest.raises(TypeError, match=r"app\.task\(.*name="):
        app.task(given)
    assert app.tasks == {}


def _worker_command(tmp_path, redis_url, queue_name, *options: str) -> subprocess.CompletedProcess[str]:
    """`conveyor worker` of a one-task app, run to its end (--burst)."""
    module = f"followupapp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "import os\nfrom conveyor import Conveyor\n"
        "app = Conveyor(os.environ['TEST_URL'], default_queue=os.environ['TEST_QUEUE'])\n"
        "@app.task\ndef noop() -> None:\n    pass\n"
    )
    env = {**os.environ, "TEST_URL": redis_url, "TEST_QUEUE": queue_name}
    return subprocess.run([*COMMAND, "worker", f"{module}:app", "--burst", *options], check=False,
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_metrics_port_in_use_is_a_runtime_failure_not_bad_input(redis_url, queue_name, tmp_path):
    """production.md's exit codes: 1 a runtime failure, 2 bad input (a usage error, an invalid
    option). `--metrics-port P` with P held by another process exited 2, as if the command line
    were wrong, though the same command succeeds once the port is free."""
    pytest.importorskip("prometheus_client")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = _worker_command(tmp_path, redis_url, queue_name, "--metrics-port", str(port))
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert done.returncode == 1, done.stderr


def test_a_metrics_address_that_does_not_resolve_is_bad_input(redis_url, queue_name, tmp_path):
    """The other side: an address no resolver knows is an invalid option (exit 2)."""
    pytest.importorskip("prometheus_client")
    done = _worker_command(tmp_path, redis_url, queue_name, "--metrics-port", "9",
                           "--metrics-addr", "no-such-host.invalid")  # fmt: skip
    assert "cannot serve metrics on no-such-host.invalid:9" in done.stderr
    assert done.returncode == 2, done.stderr


def test_a_metrics_address_without_a_port_is_bad_input(redis_url, queue_name, tmp_path):
    """`--metrics-addr 0.0.0.0` alone was silently ignored: the operator believed metrics were
    served. It is now bad input (exit 2) naming the missing option, before anything starts."""
    done = _worker_command(tmp_path, redis_url, queue_name, "--metrics-addr", "0.0.0.0")
    assert "--metrics-addr is given without --metrics-port" in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr


async def test_a_due_delayed_job_queues_behind_jobs_enqueued_before_its_promotion(api):
    """production.md said jobs of a level run "in the order they became ready"; a delayed job
    enters its level's list when a claim (or the maintenance sweep) promotes it, at the tail: with
    no claim between its due time and later enqueues, those run first. The page now says so;
    this pins the order it describes."""
    q = api.queue()
    delayed = await q.enqueue("t", "delayed", delay=0.05)
    due = api.server_ms() + 60
    while api.server_ms() < due:  # due by the server's clock, and nothing claimed since
        await asyncio.sleep(0.01)
    later = [await q.enqueue("t", i) for i in range(2)]
    claimed = await q.claim(3)
    assert [j.id for j in claimed] == [later[0].id, later[1].id, delayed.id]
    page = (Path(__file__).parents[2] / "docs" / "production.md").read_text()
    assert "in the order they became ready (FIFO)" not in page


async def test_the_eviction_policy_is_checked_before_writes_not_by_plain_reads(api, caplog):
    """tuning.md said the policy is read "when a queue connects"; it is read before a queue's first
    script call (an enqueue, a claim: every write), while counts() and get_job(), plain reads, do
    not check: an inspection tool neither warns nor raises. The page now says so; this pins it."""
    if api.server.family == "dragonfly":
        pytest.skip("Dragonfly evicts only with --cache_mode=true, not by CONFIG SET maxmemory-policy")
    original = api.config("maxmemory-policy")
    api.admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        caplog.set_level(logging.WARNING, logger="conveyor")
        strict = api.queue(strict=True)
        assert (await strict.counts())["waiting"] == 0
        assert await strict.get_job("nope") is None
        assert not [r for r in caplog.records if "maxmemory" in r.getMessage()]
        with pytest.raises(ServerConfigError, match="allkeys-lru"):
            await strict.enqueue("t", 1)
    finally:
        api.admin.config_set("maxmemory-policy", original)
    page = (Path(__file__).parents[2] / "docs" / "tuning.md").read_text()
    assert "when a queue connects" not in page


@pytest.mark.parametrize("pool_size", [1, 2])
async def test_a_result_wait_holds_one_connection_of_the_queues_pool(api, pool_size):
    """A result() wait's reader blocks in XREAD on a connection of the queue's pool while anyone
    waits: with pool_size=1 every other call of that queue waited pool_timeout and raised
    PoolExhaustedError, which connections.md did not say. It now does (a queue that waits for
    results needs pool_size 2 or more); this pins both sides."""
    if api.driver == "glide":
        pytest.skip("glide's reader has a connection of its own, outside any pool")
    q = api.queue(pool_size=pool_size, pool_timeout=0.5, store_results=True)
    job = await q.enqueue("t", 0)
    waiter = asyncio.ensure_future(q.result(job.id, timeout=3))
    await wait_until(lambda: q.inner._results.registry.running, what="the result reader")
    await asyncio.sleep(0.2)  # the reader is in its XREAD
    if pool_size == 1:
        with pytest.raises(PoolExhaustedError):
            await q.enqueue("t", 1)
    else:
        await q.enqueue("t", 1)
    with pytest.raises(TimeoutError):
        await waiter
    page = (Path(__file__).parents[2] / "docs" / "connections.md").read_text()
    assert "result()` wait" in page and "pool_size` 2 or more" in page


class _Pickled:
    """A serializer whose payloads are not text (as pickle or msgpack ones are)."""

    def dumps(self, payload):
        return pickle.dumps(payload)

    def loads(self, data):
        return pickle.loads(data)


async def test_a_client_that_decodes_replies_is_refused_with_a_binary_serializer(api):
    """A queue on a client that decodes replies (decode_responses=True) with a serializer whose
    payloads are not UTF-8 text (pickle, msgpack) enqueued, then every read of a job (claim,
    get_job, result) raised a bare UnicodeDecodeError from the client's reply parser (the CLI
    reported an internal error). The queue now refuses the combination when it is built, naming
    the option and the serializer."""
    client = _client(api, decode_responses=True)
    try:
        with pytest.raises(ValueError, match=r"decode_responses=True.*_Pickled"):
            (AsyncQueue if api.is_async else Queue)(api.name, client, serializer=_Pickled())
    finally:
        await _close(api, client)


async def test_reads_of_a_queue_without_a_version_warn_about_eviction_once(api, caplog):
    """A read-only call (jobs('waiting'), result) on a queue that has no layout version yet sent
    the start-up check again, INFO included, on every call: on a non-strict queue with an evicting
    server the maxmemory-policy warning repeated at every read until the first write. The policy
    is now read and warned about once per queue object; reads still write nothing."""
    if api.server.family == "dragonfly":
        pytest.skip("Dragonfly evicts only with --cache_mode=true, not by CONFIG SET maxmemory-policy")
    caplog.set_level(logging.WARNING, logger="conveyor")
    original = api.config("maxmemory-policy")
    api.admin.config_set("maxmemory-policy", "allkeys-lru")
    try:
        q = api.queue(name=api.name + "-reads")
        for _ in range(3):
            assert await q.jobs("waiting") == []
        assert api.queue_keys(name=api.name + "-reads") == []
        await q.enqueue("t", 1)
        assert await q.jobs("waiting") != []
    finally:
        api.admin.config_set("maxmemory-policy", original)
    warnings = [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
