"""enqueue-single's lone caller against bare PINGs measured in the same case (a real server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from conveyor import Queue

from bench.scenarios import enqueue_single
from bench.servers.launcher import start_server

PARAMS = {"payload_bytes": 64, "min_seconds": 0.4}
PINGS = ("ping_client_ops_per_s", "ping_held_ops_per_s", "vs_ping_client", "vs_ping_held")


@pytest.fixture(scope="module")
def url(bench_server: str) -> Iterator[str]:
    with start_server(bench_server) as server:
        yield server.url


def value(result: dict, name: str) -> float:
    return result["metrics"][name][0]


@pytest.mark.parametrize("batching", [False, True])
def test_a_lone_caller_is_bracketed_by_both_kinds_of_ping(url: str, batching: bool) -> None:
    result = enqueue_single.one_at_a_time(Queue.from_url(url, f"vs-ping-{batching}", batch_enqueue=batching),
                                          PARAMS, against_ping=True)
    assert result["exactly_once"]["ok"] and result["exactly_once"]["enqueued"] > 100
    rate = value(result, "jobs_per_s")
    for way in ("client", "held"):
        pings = value(result, f"ping_{way}_ops_per_s")
        assert pings > 100  # a real round trip each, not a cached reply
        assert value(result, f"vs_ping_{way}") == pytest.approx(rate / pings)
        assert result["metrics"][f"vs_ping_{way}"][1] == "ratio"


def test_the_lone_callers_script_time_and_ping_cpu_are_measured(url: str) -> None:
    stats = redis.Redis.from_url(url)
    try:
        result = enqueue_single.one_at_a_time(Queue.from_url(url, "costs"), PARAMS, against_ping=True,
                                              stats=stats)
        script, cpu = value(result, "server_script_us_per_call"), value(result, "ping_held_client_cpu_us")
        # the server's time per enqueue script, below the whole round trip it is part of
        assert 0 < script < 1e6 / value(result, "jobs_per_s")
        # a PING costs this process CPU, but not more than its whole round trip
        assert 0 < cpu < 1e6 / value(result, "ping_held_ops_per_s") * 1.5
        assert result["metrics"]["server_script_us_per_call"][1] == "us"
    finally:
        stats.close()


def test_script_time_counts_only_script_calls(url: str) -> None:
    stats = redis.Redis.from_url(url)
    try:
        sha = stats.script_load("return 1")
        before = enqueue_single.script_time(stats)
        for _ in range(5):
            stats.evalsha(sha, 0)
            stats.ping()
        calls, usec = (a - b for a, b in zip(enqueue_single.script_time(stats), before, strict=True))
        assert calls == 5 and usec >= 0
        assert enqueue_single.script_time(None) == (0, 0)
    finally:
        stats.close()


def test_callers_of_one_at_a_time_elsewhere_measure_no_ping(url: str) -> None:
    result = enqueue_single.one_at_a_time(Queue.from_url(url, "no-ping"), PARAMS)
    # scale-out and tls cases stay as they were
    assert not {*PINGS, "server_script_us_per_call", "ping_held_client_cpu_us"} & set(result["metrics"])


def test_held_pings_use_one_connection_and_give_it_back(url: str) -> None:
    client = redis.Redis.from_url(url, max_connections=1)  # a second connection would raise
    try:
        for _ in range(2):
            pings, seconds = enqueue_single.ping_held(client, 0.05)
            assert pings > 10 and seconds >= 0.05
        assert client.ping()  # the pool's only connection is back
    finally:
        client.close()


def test_a_lone_caller_measures_a_plain_write_against_the_same_pings(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        result = enqueue_single.one_at_a_time(Queue.from_url(url, "vs-set"), PARAMS, against_ping=True)
        sets = value(result, "set_held_ops_per_s")
        assert sets > 100  # a real round trip each
        pings = value(result, "ping_held_ops_per_s")
        assert value(result, "set_held_vs_ping_held") == pytest.approx(sets / pings)
        assert result["metrics"]["set_held_vs_ping_held"][1] == "ratio"
        assert client.exists(enqueue_single.SET_PROBE) == 0  # the probe key is not left behind
    finally:
        client.close()


def test_held_sets_are_skipped_for_a_client_without_a_pool() -> None:
    both = {"client": (10, 1.0, 0.1), "held": (20, 1.0, 0.1)}
    assert enqueue_single.set_metrics(both, both) == {}
    with_set = {**both, "set": (10, 1.0, 0.1)}
    found = enqueue_single.set_metrics(with_set, with_set)
    assert found["set_held_vs_ping_held"][0] == pytest.approx(0.5)
