"""The valkey-glide driver's pure parts: error mapping, URL reading and its explicit refusals."""

from __future__ import annotations

import asyncio
import gc

import pytest
from conveyor import ConnectionFailedError, ConveyorError, PermissionDeniedError, Queue, QueueSettings
from conveyor._connection import translate_error
from conveyor._glide import SEAM, GlideSync
from conveyor._glide_async import idle_reply_loop
from conveyor._glide_common import _SOURCES, _info, redis_error
from redis import exceptions as redis_errors

pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")


def glide_error(kind: str, message: str) -> Exception:
    return type(kind, (Exception,), {})(message)


@pytest.mark.parametrize(
    ("kind", "message", "expected", "text"),
    [
        ("RequestError", "An error was signalled by the server: - NoScriptError: No matching script.",
         redis_errors.NoScriptError, "No matching script."),
        ("RequestError", "An error was signalled by the server: - ResponseError: Unknown command",
         redis_errors.ResponseError, "Unknown command"),
        ("RequestError", "CONVEYOR_BOUND: too many", redis_errors.ResponseError, "CONVEYOR_BOUND: too many"),
        ("RequestError", "NOPERM this user has no permissions", redis_errors.NoPermissionError,
         "this user has no permissions"),
        ("TimeoutError", "timed out", redis_errors.TimeoutError, "timed out"),
        ("ClosingError", "Received error for address `127.0.0.1:1`", redis_errors.ConnectionError,
         "127.0.0.1:1"),
        ("ConnectionError", "connection reset", redis_errors.ConnectionError, "connection reset"),
    ],
)
def test_glide_errors_become_the_redis_py_errors_conveyor_handles(kind, message, expected, text):
    mapped = redis_error(glide_error(kind, message))
    assert type(mapped) is expected
    assert text in str(mapped)
    assert "signalled" not in str(mapped)


@pytest.mark.parametrize(
    ("message", "conveyor_error", "text"),
    [  # glide 2.6's words for these replies of Valkey 9.1
        ("An error was signalled by the server: - BusyLoadingError: Valkey is loading the dataset in memory",
         ConnectionFailedError, "loading the dataset"),
        ("An error was signalled by the server: - PermissionDenied: User u has no permissions to run the "
         "'evalsha' command", PermissionDeniedError, "the command 'EVALSHA'"),
        ("An error was signalled by the server: - ClusterDown: The cluster is down",
         ConnectionFailedError, "The cluster is down"),
        ("An error was signalled by the server: - MasterDown: Link with MASTER is down",
         ConnectionFailedError, "Link with MASTER is down"),
    ],
)
def test_glide_server_errors_become_the_conveyor_errors_redis_py_gives(message, conveyor_error, text):
    """LOADING (a restart or a replica's full sync): the call did not run. redis-py raises
    BusyLoadingError, a ConnectionError, hence ConnectionFailedError; glide's came out as a plain
    ResponseError, which a caller retrying a lost server does not catch."""
    mapped = translate_error("127.0.0.1:6379/0", redis_error(glide_error("RequestError", message)), None)
    assert type(mapped) is conveyor_error
    assert text in str(mapped)
    assert "127.0.0.1:6379/0" in str(mapped)


def test_info_text_is_read_as_a_dict():
    reply = b"# Memory\r\nused_memory:1\r\nmaxmemory_policy:noeviction\r\n"
    assert _info(reply)["maxmemory_policy"] == "noeviction"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "redis-py"),
        ("redis+sentinel://127.0.0.1:26379/mymaster", "redis-py"),
        ("unix:///tmp/valkey.sock", "redis-py"),
        ("redis://127.0.0.1:6379/0?health_check_interval=5", "health_check_interval"),
    ],
)
def test_what_glide_cannot_do_is_an_explicit_error(url, match):
    with pytest.raises(ConveyorError, match=match):
        Queue.from_url(url, "q", driver="glide")


def test_a_missing_ca_file_is_an_error_naming_the_option(tmp_path):
    """It was a bare FileNotFoundError from inside the glide configuration."""
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConveyorError, match=f"ssl_ca_certs names {missing}.*cannot be read"):
        Queue.from_url(f"rediss://:secret@127.0.0.1:6379/0?ssl_ca_certs={missing}", "q", driver="glide")


def test_an_unknown_driver_is_refused():
    with pytest.raises(ValueError, match="driver must be"):
        QueueSettings(driver="aioredis")


def test_the_adapter_implements_the_whole_seam_and_names_roles():
    for method in SEAM:
        assert hasattr(GlideSync, method) or method == "aclose", method
    client = GlideSync("redis://127.0.0.1:1/2", QueueSettings(driver="glide"))  # lazy: no I/O yet
    waiter = client.role("jobs", "waiter", block_timeout=2.0)
    assert waiter.client_name == "conveyor:jobs:waiter"
    assert waiter.address == "127.0.0.1:1/2"
    assert waiter._config.request_timeout == 7000  # outlasts the 2 s block
    client.close()
    waiter.close()


def test_only_a_reply_loop_of_another_thread_left_idle_is_refused(monkeypatch):
    """glide reads every asyncio reply on its first client's loop (valkey-glide#7122): a client on
    another loop is refused while that loop is open and not running, and only then."""
    pipe = pytest.importorskip("glide.glide_client", reason="valkey-glide is not installed")
    ours, other = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        for owner in (None, ours):
            monkeypatch.setattr(pipe, "_async_pipe_loop", owner)
            assert idle_reply_loop(ours) is None
        monkeypatch.setattr(pipe, "_async_pipe_loop", other)
        assert "valkey-io/valkey-glide#7122" in str(idle_reply_loop(ours))
        monkeypatch.setattr(other, "is_running", lambda: True)
        assert idle_reply_loop(ours) is None
        monkeypatch.undo()
        other.close()
        monkeypatch.setattr(pipe, "_async_pipe_loop", other)
        assert idle_reply_loop(ours) is None
    finally:
        ours.close()
        other.close()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("TryAgain", redis_errors.TryAgainError), ("ReadOnly", redis_errors.ReadOnlyError)],
)
def test_glide_cluster_error_kinds_are_the_redis_py_classes(name, expected):
    """Callers (and the grouped Cluster path, which waits out TRYAGAIN) tell these apart by class,
    as redis-py raises them; glide's came out as a plain ResponseError."""
    message = f"An error was signalled by the server: - {name}: some text"
    assert type(redis_error(glide_error("RequestError", message))) is expected


@pytest.mark.parametrize("io", ["", "IoError: "])
def test_a_server_reply_that_failed_glides_connect_is_quoted_as_redis_py_quotes_it(io):
    """A server at maxclients answers a new connection 'max number of clients reached'; when glide
    reads that reply (else it says its connection terminated, see _connect_hint) the error kept
    glide's preamble: 'cannot reach the server at ...: An error was signalled by the server: -
    ResponseError: max number of clients reached', where redis-py says '...: max number of
    clients reached'."""
    message = (
        f"Standalone connect failed - {io}Received error for address `127.0.0.1:6379`: "
        "An error was signalled by the server: - ResponseError: max number of clients reached"
    )
    mapped = translate_error("127.0.0.1:6379/0", redis_error(glide_error("RequestError", message)), None)
    assert type(mapped) is ConnectionFailedError
    assert str(mapped) == "cannot reach the server at 127.0.0.1:6379/0: max number of clients reached"


@pytest.mark.parametrize(
    "exc",
    [redis_errors.ClusterDownError("The cluster is down"), redis_errors.MasterDownError("MASTERDOWN"),
     redis_errors.ClusterError("TTL exhausted.")],
)
def test_a_cluster_that_cannot_serve_now_is_a_connection_failure(exc):
    """redis-py's CLUSTERDOWN, MASTERDOWN and exhausted cluster retries reached the caller raw;
    like an unreachable server, they are ConnectionFailedError (the call can be retried)."""
    mapped = translate_error("127.0.0.1:7000", exc, None)
    assert type(mapped) is ConnectionFailedError and str(exc) in str(mapped)


def test_glide_scripts_outlive_the_clients_that_used_them(monkeypatch):
    """A glide Script freed by the cyclic GC while its thread was inside cffi deadlocked the process
    (Script.__del__ takes cffi's lock, which is not re-entrant: a CI run hung). Scripts are now kept
    for the process: a closed, collected client frees none, and the next client reuses them."""
    freed: list[str] = []
    first = GlideSync("redis://127.0.0.1:1/0", QueueSettings(driver="glide"))  # lazy: no I/O yet
    monkeypatch.setattr(first._glide.Script, "__del__", lambda self: freed.append(self.hash), raising=True)
    sha = next(iter(_SOURCES))
    first._script(sha)
    first.close()
    del first
    gc.collect()
    assert freed == []
    second, third = (GlideSync("redis://127.0.0.1:1/0", QueueSettings(driver="glide")) for _ in "23")
    assert second._script(sha) is third._script(sha)
    second.close()
    third.close()
