"""Peers: library selection, install failures, counting by id, the cutting proxy, one
Conveyor row driven end to end through the child process, and the Peers page sections."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import redis

import bench.peers.venvs as venvs
from bench.cli import main
from bench.peers import LIBRARIES, Library, resolve
from bench.peers.drive import Child, Hung
from bench.peers.measure import CountMismatch, Row, count, run_guarded
from bench.peers.proxy import CuttableProxy
from bench.peers.venvs import InstallError, first_error, python_for


def test_unknown_library_lists_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="unknown library nope; known: all, conveyor, bullmq"):
        resolve(["conveyor", "nope"])
    assert resolve(["all"]) == list(LIBRARIES)
    assert resolve(["bullmq", "bullmq", "conveyor"]) == ["bullmq", "conveyor"]


def test_install_failure_gives_pips_first_error_line(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVEYOR_BENCH_VENVS", str(tmp_path))
    lib = Library("broken", (str(tmp_path / "no-such-project"),), "conveyor", {}, {}, "")
    with pytest.raises(InstallError) as caught:
        python_for(lib)
    assert str(caught.value).startswith("ERROR")
    assert "\n" not in str(caught.value)
    assert not (next(tmp_path.iterdir()) / ".installed").exists()


def test_first_error_prefers_the_error_line() -> None:
    assert first_error("Collecting x\nERROR: No matching distribution\nERROR: more\n") == \
        "ERROR: No matching distribution"
    assert first_error("") == "pip failed without output"


def test_completions_are_counted_by_id() -> None:
    log = [("a", 1.0), ("b", 1.1), ("b", 1.2), ("z", 1.3)]
    assert count(["a", "b", "c"], log) == {"enqueued": 3, "completed": 2, "lost": 1,
                                           "duplicated": 1, "unknown": 1}
    outcome = run_guarded(lambda: (_ for _ in ()).throw(CountMismatch({"lost": 1})))
    assert outcome["status"] == "failed" and outcome["counts"] == {"lost": 1}


def test_proxy_cut_drops_connections_then_recovers(redis_url: str) -> None:
    host, port = redis_url.split("//")[1].split("/", maxsplit=1)[0].rsplit(":", 1)
    proxy = CuttableProxy(host, int(port))
    client = redis.Redis.from_url(proxy.url, socket_timeout=5)
    try:
        assert client.ping()
        proxy.cut(0.5)
        client.connection_pool.disconnect()
        assert client.ping()  # reopened on the same port
        started = time.monotonic()
        cutter = threading.Thread(target=proxy.cut, args=(1.0,))
        cutter.start()
        time.sleep(0.2)
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(proxy.url, socket_timeout=1).ping()
        cutter.join()
        assert time.monotonic() - started >= 1.0
    finally:
        client.close()
        proxy.close()


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()


def test_conveyor_row_end_to_end(redis_url: str) -> None:
    lib = LIBRARIES["conveyor"]
    child = Child(lib, sys.executable, redis_url, lib.flavors["Worker"])
    row = Row(child, lambda: _flush(redis_url), lambda: 0, repetitions=1, timeout=60)
    rate = row.process(50, 4)["jobs_per_s"]["median"]
    assert rate > 0
    assert row.enqueue(20, "bulk")["jobs_per_s"]["median"] > 0
    latency = row.latency(5)
    assert latency["p50_ms"]["median"] <= latency["p99_ms"]["median"]


def test_a_hung_child_is_killed(redis_url: str) -> None:
    lib = LIBRARIES["conveyor"]
    child = Child(lib, sys.executable, redis_url, lib.flavors["Worker"])
    log = child.tmp / "never.log"
    log.touch()
    started = time.monotonic()
    with pytest.raises(Hung, match="killed"):  # no worker: the job is never done
        child.call("latency", 2.0, ids=["x"], log=str(log), wait_s=60)
    assert time.monotonic() - started < 20


def test_list_prints_the_peer_plan_without_running_it(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # --list once ran the whole peer comparison (installs, servers, minutes of load).
    def refuse(*_: object) -> str:
        raise AssertionError("--list must not install or run a peer")

    monkeypatch.setattr(venvs, "python_for", refuse)
    assert main(["--libraries", "all", "--servers", "valkey-9.1,redis-8.2", "--list"]) == 0
    out = capsys.readouterr().out
    assert "rq @ valkey-9.1" in out and "bullmq @ redis-8.2" in out
