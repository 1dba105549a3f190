"""The launcher starts, configures, restarts and stops every local server kind for real."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis

from bench import servers
from bench.servers import (
    KINDS,
    RunningServer,
    ServerStartError,
    ServerUnavailable,
    connect_external,
    is_empty,
    locate,
    start_server,
)

LOCAL = [k.id for k in KINDS if k.family != "dragonfly"]
REPO = Path(__file__).resolve().parents[2]


def _require(kind: str) -> None:
    """Skip with the launcher's reason when this machine cannot run `kind`."""
    try:
        locate(kind)
    except ServerUnavailable as exc:
        pytest.skip(exc.reason)


def _gone(pid: int) -> bool:
    """True when no live process has this pid (a reaped child or a zombie both count as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_server_fixture_answers_ping_and_reports_itself(server: RunningServer) -> None:
    expected = servers.get_kind(server.kind).expected
    with server.client() as client:
        assert client.ping() is True
    if expected:
        assert server.version.startswith(expected + "."), server.version
    else:
        assert server.version
    assert server.allocator or server.family == "dragonfly"
    assert server.flags[0].startswith("--") and str(server.binary) not in server.flags
    assert server.url == f"redis://127.0.0.1:{server.port}/0"


def test_redis_url_fixture(redis_url: str, queue_name: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.ping() is True
    assert "{" not in queue_name and "}" not in queue_name


def test_queue_names_are_unique(queue_name: str) -> None:
    assert queue_name.startswith("t-test_queue_names_are_unique")


@pytest.mark.parametrize("kind", LOCAL)
def test_defaults_are_applied(kind: str) -> None:
    _require(kind)
    with start_server(kind) as srv, srv.client(decode_responses=True) as c:
        assert c.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert c.config_get("appendonly") == {"appendonly": "no"}
        assert c.config_get("save") == {"save": ""}
        assert c.config_get("bind")["bind"] == "127.0.0.1"
        assert Path(c.config_get("dir")["dir"]).resolve() == srv.data_dir.resolve()


@pytest.mark.parametrize("kind", LOCAL)
def test_listpack_1024_is_applied(kind: str) -> None:
    _require(kind)
    with start_server(kind, "listpack-1024") as srv, srv.client(decode_responses=True) as c:
        assert c.config_get("hash-max-listpack-value") == {"hash-max-listpack-value": "1024"}
        c.hset("h", mapping={"payload": "x" * 1000})
        assert c.object("encoding", "h") == "listpack"
        assert srv.record()["config"] == "listpack-1024"


@pytest.mark.parametrize("kind", LOCAL)
def test_aof_everysec_is_applied(kind: str) -> None:
    _require(kind)
    with start_server(kind, "aof-everysec") as srv, srv.client(decode_responses=True) as c:
        assert c.config_get("appendonly") == {"appendonly": "yes"}
        assert c.config_get("appendfsync") == {"appendfsync": "everysec"}


@pytest.mark.parametrize("kind", LOCAL)
def test_restart_keeps_port_and_stop_leaves_nothing(kind: str) -> None:
    _require(kind)
    with start_server(kind) as srv:
        port, pid, data_dir = srv.port, srv.pid, srv.data_dir
        assert pid is not None and psutil.Process(pid).is_running()
        srv.restart()
        assert srv.port == port and srv.url.endswith(f":{port}/0")
        assert srv.pid != pid and _gone(pid)
        with srv.client() as c:
            assert c.ping() is True
        new_pid = srv.pid
        assert new_pid is not None
    assert _gone(new_pid)
    assert not data_dir.exists()
    srv.stop()  # idempotent


def test_restart_after_kill_keeps_data_with_aof() -> None:
    kind = LOCAL[0]
    _require(kind)
    with start_server(kind, "aof-always") as srv:
        with srv.client() as c:
            c.set("k", "v")
        srv.kill()
        assert not srv.running
        srv.restart()
        with srv.client() as c:
            assert c.get("k") == b"v"


def _our_servers(binary: str) -> set[int]:
    """Live children of this test process running `binary` (other sessions share the machine)."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.exe() == binary and child.status() != psutil.STATUS_ZOMBIE:
                pids.add(child.pid)
    return pids


def test_failed_start_leaves_no_process() -> None:
    kind = LOCAL[0]
    binary = str(locate(kind))
    before = _our_servers(binary)
    with (
        pytest.raises(ServerStartError, match="log tail"),
        start_server(kind, extra_args=["--no-such-directive", "1"]),
    ):
        pass
    after = _our_servers(binary)
    assert after <= before


def test_busy_port_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    kind = LOCAL[0]
    _require(kind)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        ports = iter([taken])
        real = servers.launcher._free_port
        monkeypatch.setattr(servers.launcher, "_free_port", lambda: next(ports, None) or real())
        with start_server(kind) as srv:
            assert srv.port != taken
            with srv.client() as c:
                assert c.ping() is True


def test_dragonfly_runs_or_is_skipped_with_reason() -> None:
    try:
        locate("dragonfly")
    except ServerUnavailable as exc:
        assert "DRAGONFLY_BIN" in exc.reason
        pytest.skip(exc.reason)
    for mode in ("hashtag", "global"):
        with start_server("dragonfly", dragonfly_mode=mode, threads=2) as srv:
            assert srv.version and srv.threads == 2 and srv.mode == mode
            with srv.client() as c:
                assert c.ping() is True


def test_external_server_reads_info_and_hides_password(server: RunningServer) -> None:
    if server.family == "dragonfly":
        pytest.skip("ACL setup below is Redis/Valkey syntax")
    with server.client() as c:
        c.execute_command("ACL", "SETUSER", "bench", "on", ">s3cret", "~*", "&*", "+@all")
    try:
        url = f"redis://bench:s3cret@127.0.0.1:{server.port}/0"
        ext = connect_external(url, name="mine")
        assert ext.version == server.version and ext.family == server.family
        assert ext.allocator == server.allocator
        for shown in (repr(ext), ext.display_url, str(ext.record())):
            assert "s3cret" not in shown
        with pytest.raises(ServerUnavailable) as info:
            connect_external(f"redis://bench:wrong-pw@127.0.0.1:{server.port}/0")
        assert "wrong-pw" not in str(info.value)
    finally:
        with server.client() as c:
            c.execute_command("ACL", "DELUSER", "bench")


def test_is_empty(server: RunningServer) -> None:
    url = server.url.rsplit("/", 1)[0] + "/9"
    with redis.Redis.from_url(url) as c:
        c.flushdb()
        assert is_empty(url)
        c.set("x", 1)
        assert not is_empty(url)
        c.flushdb()


_DIES_HOLDING_A_SERVER = """
import os, sys
from bench.servers import start_server
held = start_server(sys.argv[1])  # kept: collecting it would stop the server
srv = held.__enter__()
print(srv.pid, flush=True)
os._exit(0)  # no atexit hook runs, as after SIGKILL
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_server_ends_with_the_process_that_started_it_even_when_it_dies_abruptly() -> None:
    """Before, a bench or test process killed (or ending with os._exit) left its servers running
    for good: the bench's die-after-cells test left one behind in every full test run."""
    kind = LOCAL[0]
    _require(kind)
    out = subprocess.run([sys.executable, "-c", _DIES_HOLDING_A_SERVER, kind], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"server pid {pid} outlived the process that started it")
