"""What the reworked scenarios record (one quick run on one server, baseline variant only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conveyor._lanes import pump_count

from bench.results import load_results
from bench.scenarios import connections, latency

pytestmark = pytest.mark.timeout(400)
BASELINE = ["--quick", "--configs", "default", "--protocols", "3", "--parsers", "hiredis"]


@pytest.fixture(scope="module")
def doc(bench_server, tmp_path_factory) -> dict[str, Any]:
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "queue")])}
    out: Path = tmp_path_factory.mktemp("rows")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--servers", bench_server, *BASELINE,
         "--scenarios", "process,latency,connections", "--output", str(out)],
        cwd=repo, env=env, capture_output=True, text=True, timeout=380, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [result] = load_results(out)
    return result


def rows(doc: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    return [r for r in doc["results"] if r["scenario"] == scenario]


def value(row: dict[str, Any], metric: str) -> float:
    return row["metrics"][metric]["median"]


def test_process_times_the_claim_to_ack_window_inside_the_worker_run(doc) -> None:
    found = rows(doc, "process")
    for row in found:
        # the stored-results and prefetch cases name their timings apart (never read as a
        # figure of the default worker's no-op drain)
        end = ("_storing_results" if "result_bytes" in row["params"]
               else "_prefetch" if "prefetch" in row["params"] else "")
        assert 0 < value(row, "elapsed_s" + end) <= value(row, "worker_run_s" + end)
        assert value(row, "jobs") >= row["params"]["calibration_jobs"]
        assert value(row, "jobs_per_s" + end) == pytest.approx(
            value(row, "jobs") / value(row, "elapsed_s" + end))
        assert row["exactly_once"]["ok"]
        # Client CPU over the same window: positive, and at most every core busy all along.
        cpu_s = value(row, "client_cpu_us_per_job" + end) * value(row, "jobs") / 1e6
        assert 0 < cpu_s <= value(row, "elapsed_s" + end) * (os.cpu_count() or 1) * 1.05
        assert row["metrics"]["client_cpu_us_per_job" + end]["unit"] == "us"
    [storing] = [r for r in found if "result_bytes" in r["params"]]
    assert storing["params"]["result_bytes"] == 100 and storing["params"]["concurrency"] == 32
    # the prefetch case: the same drain with prefetch, beside the plain case of its concurrency,
    # and none of its figures under a name the default worker's readers (headline) take
    [ahead] = [r for r in found if "prefetch" in r["params"]]
    assert ahead["params"]["prefetch"] == 32 and ahead["params"]["concurrency"] == 32
    assert not {"jobs_per_s", "client_cpu_us_per_job", "elapsed_s"} & set(ahead["metrics"])
    assert "headline" not in ahead
    cased = {"prefetch", "result_bytes", "features"}
    assert any(r["params"].get("concurrency") == 32 and not cased & set(r["params"]) for r in found)


def test_latency_rows_record_samples_capacity_and_the_partly_busy_case(doc) -> None:
    by_load = {r["params"]["load"]: r for r in rows(doc, "latency")}
    assert set(by_load) == {"unloaded", "partly-busy", *latency.QUICK["loads"]}
    for load in ("unloaded", "partly-busy"):
        assert value(by_load[load], "samples") == latency.QUICK["unloaded_jobs"]
    busy = by_load["partly-busy"]["params"]
    assert 0 < busy["busy"] < busy["concurrency"]
    loaded = by_load[latency.QUICK["loads"][0]]
    assert value(loaded, "capacity_jobs_per_s") > 0 and value(loaded, "samples") > 0
    assert 1 <= value(loaded, "producers") <= latency.QUICK["max_producers"]
    assert value(loaded, "target_per_s") == pytest.approx(
        value(loaded, "capacity_jobs_per_s") * latency.QUICK["loads"][0])
    assert value(loaded, "offered_load") > 0


def test_connection_roles_at_each_concurrency_and_memory_per_connection(doc) -> None:
    found = rows(doc, "connections")
    roles = {r["params"]["concurrency"]: r for r in found if r["params"]["kind"] == "roles"}
    assert sorted(roles) == connections.QUICK["worker_concurrencies"]
    for concurrency, row in roles.items():  # an AsyncWorker: two pumps (each with a maint) from 8 on
        pumps = pump_count(None, concurrency)
        assert value(row, "connections_pump") == value(row, "connections_maint") == pumps
        assert value(row, "connections_waiter") == 1
    served = {r["params"]["queues"]: r for r in found if r["params"]["kind"] == "queues"}
    assert sorted(served) == connections.QUICK["worker_queues"]
    for n, row in served.items():  # a pump and a maint per queue, one waiter for all
        assert value(row, "connections_pump") == value(row, "connections_maint") == n
        assert value(row, "connections_waiter") == 1
    [memory] = [r for r in found if r["params"]["kind"] == "memory"]
    assert value(memory, "bytes_per_connection") > 0
    assert all(value(r, "jobs") > 0 for r in found if r["params"]["kind"] == "pool")


def test_headline_rows_carry_their_stated_conditions(doc) -> None:
    marked = {r["scenario"]: r for r in doc["results"] if "headline" in r}
    assert marked["process"]["params"]["concurrency"] == 32
    assert marked["latency"]["params"]["load"] == "unloaded"
    assert marked["connections"]["params"] == {"kind": "roles", "concurrency": 32}
    assert set(doc["method"]["headlines"]) == {"process", "latency", "connections"}
    assert doc["library_defaults"]["queue.pool_size"] >= 1
