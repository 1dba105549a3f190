"""The harness keeps what it measured: per-case processes, partial metrics, failing cells, dying runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import harness
from bench.harness import Cell, aggregate, measure_cell
from bench.results import load_results
from bench.scenarios._common import Target

SMALL = ["--quick", "--configs", "default", "--protocols", "3", "--parsers", "hiredis"]
TARGET = Target(server="valkey-9.1", family="valkey", version="9.1.2", config="default",
                url="redis://127.0.0.1:1/0")


def outcome(**metrics: float) -> dict[str, Any]:
    return {"ok": True, "metrics": {k: [v, "1/s"] for k, v in metrics.items()},
            "exactly_once": None, "extra": {}}


def test_a_metric_missing_in_some_repetitions_is_aggregated_with_its_count() -> None:
    cell = Cell("maintenance", TARGET, [{"backlog": 10}])
    row = aggregate(cell, 0, [outcome(a=1, b=5), outcome(a=2), outcome(a=3, b=7)], 3, 0)
    assert row["metrics"]["a"]["count"] == 3 and row["metrics"]["a"]["median"] == 2
    assert row["metrics"]["b"]["count"] == 2 and row["metrics"]["b"]["values"] == [5, 7]


def test_every_case_runs_in_its_own_process_after_its_own_flush(monkeypatch) -> None:
    calls: list[tuple[str, int]] = []

    def fake_run(scenario, target, cases, timeout, rep):
        [case] = cases  # one case per process
        calls.append(("run", case["n"]))
        value = float("nan") if case["n"] == 1 else 1.0  # case 1 cannot be aggregated
        return [outcome(x=value)]

    monkeypatch.setattr(harness, "run_repetition", fake_run)
    cell = Cell("process", TARGET, [{"n": 0}, {"n": 1}, {"n": 2}])
    result = measure_cell(cell, 2, 1, between=lambda: calls.append(("flush", -1)))
    every = [("flush", -1), ("run", 0), ("flush", -1), ("run", 1), ("flush", -1), ("run", 2)]
    assert calls == every[:2] + every * 2  # the warm-up runs the first case only
    assert [r["params"]["n"] for r in result.results] == [0, 2]  # the others are kept
    [failure] = result.failures
    assert failure["params"] == {"n": 1} and failure["kind"] == "aggregate"


def test_a_warm_up_repetition_runs_time_bound_sizes_shorter(monkeypatch) -> None:
    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(harness, "run_repetition",
                        lambda s, t, cases, timeout, rep: seen.extend(cases) or [outcome(x=1)])
    cell = Cell("process", TARGET, [{"min_seconds": 2.0, "concurrency": 32}])
    measure_cell(cell, 1, 1)
    assert seen == [{"min_seconds": 2.0 * harness.WARMUP_SCALE, "concurrency": 32},
                    {"min_seconds": 2.0, "concurrency": 32}]


def test_injected_missing_metric_is_reported_with_its_count(run_bench, bench_server, tmp_path):
    proc = run_bench("--servers", bench_server, "--scenarios", "enqueue-single", *SMALL,
                     "--repetitions", "2", "--param", "enqueue-single.min_seconds=0.1",
                     "--param", "enqueue-single.callers=1", "--param", "enqueue-single.batching=false",
                     "--output", str(tmp_path), env={"BENCH_INJECT": "drop-metric:p50_ms"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [doc] = load_results(tmp_path)
    [row] = doc["results"]
    assert row["metrics"]["p50_ms"]["count"] == 1  # repetition 2 (odd index) did not report it
    assert row["metrics"]["jobs_per_s"]["count"] == 2
    assert doc["method"]["complete"] is True and not doc["failures"]


def test_a_run_that_dies_keeps_the_cells_measured_before(run_bench, bench_server, tmp_path):
    proc = run_bench("--servers", bench_server, "--scenarios", "reference,enqueue-single",
                     *SMALL, "--param", "reference.seconds=0.05",
                     "--param", "enqueue-single.min_seconds=0.1",
                     "--output", str(tmp_path), env={"BENCH_INJECT": "die-after-cells:1"})
    assert proc.returncode == 70, proc.stdout + proc.stderr
    [path] = tmp_path.rglob("*.json")
    doc = json.loads(path.read_text())
    [doc] = load_results(path)  # the partial file is valid
    assert doc["method"]["complete"] is False
    assert {r["scenario"] for r in doc["results"]} == {"reference"}
    assert doc["servers"][0]["id"] == bench_server and doc["servers"][0]["measured"]


@pytest.mark.parametrize(("args", "words"), [
    (["--servers", "nope"], ["unknown server", "valkey-9.1"]),
    (["--scenarios", "nope"], ["unknown scenario", "process"]),
    (["--param", "nope.x=1"], ["unknown scenario", "nope"]),
    (["--param", "process.nope=1"], ["unknown key", "min_seconds"]),
    (["--servers", ""], ["at least one server"]),
    (["--repetitions", "0"], ["at least 1"]),
])
def test_bad_names_get_a_clear_error_and_no_traceback(run_bench, args: list[str],
                                                       words: list[str]) -> None:
    proc = run_bench(*args, "--list")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr


def test_help_lists_the_options(run_bench) -> None:
    proc = run_bench("--help")
    assert proc.returncode == 0 and "--scenarios" in proc.stdout and "--quick" in proc.stdout


def test_committed_result_files_still_validate() -> None:
    repo = Path(__file__).resolve().parents[2]
    docs = load_results(repo / "results" / "v1")  # files made before the schema additions
    assert docs and all(d["schema_version"] == 1 for d in docs)
