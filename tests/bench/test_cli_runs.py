"""End-to-end runs of ``python -m bench`` against real servers (kept short: --quick, one server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.results import load_results
from bench.servers import start_server

pytestmark = pytest.mark.timeout(300)
SMALL = ["--quick", "--configs", "default", "--protocols", "3", "--parsers", "hiredis"]


def test_quick_run_output_validates_against_schema(run_bench, bench_server, tmp_path: Path):
    proc = run_bench("--servers", f"{bench_server},dragonfly", "--scenarios", "reference,process",
                     "--quick", "--output", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [doc] = load_results(tmp_path)  # validates against results/schema/v1.json
    [path] = tmp_path.rglob("*.json")
    assert path.parent.name == f"conveyor-{doc['conveyor_version']}"
    assert path.parent.parent.name == "v1"
    assert str(path) in proc.stdout.replace("\n", "")
    server = next(s for s in doc["servers"] if s["id"] == bench_server)
    assert server["measured"] and server["version"] and server["allocator"]
    scenarios = {r["scenario"] for r in doc["results"]}
    assert scenarios == {"reference", "process"}
    for row in doc["results"]:
        if row["scenario"] == "process":
            assert row["exactly_once"]["ok"] and row["exactly_once"]["lost"] == 0
    assert {(r["protocol"], r["parser"]) for r in doc["results"]} >= {(3, "hiredis"),
                                                                     (2, "hiredis"),
                                                                     (3, "python")}
    dragonfly = next(s for s in doc["servers"] if s["id"] == "dragonfly")
    if not dragonfly["measured"]:
        assert dragonfly["reason"] and "dragonfly" in dragonfly["command"]
    assert doc["method"]["quick"] is True and doc["method"]["process_per_repetition"] is True
    assert not doc.get("failures")


@pytest.mark.parametrize("inject", ["duplicate", "lost"])
def test_injected_exactly_once_violation_fails_the_run(run_bench, bench_server, tmp_path, inject):
    proc = run_bench("--servers", bench_server, "--scenarios", "process", *SMALL,
                     "--param", "process.concurrencies=[100]",  # one case: no stored-result case
                     "--param", "process.result_bytes=0",
                     "--output", str(tmp_path),
                     env={"BENCH_INJECT": inject})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exactly-once" in proc.stdout and "FAILED" in proc.stdout
    [doc] = load_results(tmp_path)
    assert doc["results"] == []  # no figure for the violating case
    [failure] = doc["failures"]
    assert failure["kind"] == "exactly-once" and failure["scenario"] == "process"
    word = "duplicates=1" if inject == "duplicate" else "lost=1"
    assert word in failure["error"]


def test_external_server_holding_keys_is_refused_without_force(run_bench, bench_server, tmp_path):
    with start_server(bench_server) as srv:
        client = srv.client()
        client.set("user-data", "precious")
        args = ["--server-url", f"ext={srv.url}", "--scenarios", "reference", *SMALL,
                "--output", str(tmp_path)]
        proc = run_bench(*args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        out = proc.stdout.replace("\n", " ")
        assert "will NOT be flushed" in out and "--force-flush" in out and "Refusing" in out
        assert client.get("user-data") == b"precious"
        assert not list(tmp_path.rglob("*.json"))

        proc = run_bench(*args, "--force-flush")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert client.get("user-data") is None
        [doc] = load_results(tmp_path)
        [server] = doc["servers"]
        assert server["external"] and server["version"] == srv.version
        assert {r["config"] for r in doc["results"]} == {"external"}
        client.close()


def test_external_url_credentials_never_reach_the_file(run_bench, bench_server, tmp_path):
    with start_server(bench_server) as srv:
        with srv.client() as client:
            client.config_set("requirepass", "s3cret")
        url = f"redis://default:s3cret@{srv.host}:{srv.port}/0"
        proc = run_bench("--server-url", f"ext={url}", "--scenarios", "reference", *SMALL,
                         "--output", str(tmp_path))
        assert "s3cret" not in proc.stdout + proc.stderr
        [path] = tmp_path.rglob("*.json")
        assert "s3cret" not in path.read_text()
        assert json.loads(path.read_text())["servers"][0]["url"].endswith(f":{srv.port}/0")


def test_uvloop_runs_are_recorded_in_the_method_and_every_row(run_bench, bench_server, tmp_path):
    proc = run_bench("--servers", bench_server, "--scenarios", "lifecycle", *SMALL,
                     "--loop", "uvloop", "--output", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [doc] = load_results(tmp_path)
    assert doc["method"]["loop"] == "uvloop"
    assert doc["results"] and all(r["params"]["loop"] == "uvloop" for r in doc["results"])
