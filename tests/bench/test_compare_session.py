"""One quick real compare: HEAD against itself, built in its own venv, runs interleaved on one server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.compare.cli import main
from bench.servers import ServerUnavailable, get_kind, locate

SERVER = "valkey-9.1"


@pytest.fixture
def server_available() -> None:
    try:
        locate(get_kind(SERVER))
    except ServerUnavailable as exc:
        pytest.skip(f"{SERVER}: {exc.reason}")


def test_head_against_itself_quick(tmp_path: Path, capsys, server_available) -> None:
    code = main(["HEAD", "HEAD", "--quick", "--runs", "3", "--scenarios", "reference,enqueue-single",
                 "--servers", SERVER, "--format", "json", "--workdir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["method"]["interleaved"] is True
    assert report["base"]["commits"] == report["head"]["commits"]
    scenarios = {r["scenario"] for r in report["rows"]}
    assert scenarios == {"reference", "enqueue-single"}
    assert all(r["n_base"] == r["n_head"] == 3 and r["aa"]["n_head"] == 3 for r in report["rows"])
    # Three runs a side cannot reach p < 0.01, and the report says so instead of flagging anything.
    assert report["summary"]["regressed"] == report["summary"]["improved"] == 0
    assert any("smallest reachable p" in note for note in report["notes"])
    assert {r["variant"] for r in report["rows"]} == {f"{SERVER}/default/resp3/hiredis"}
    # One result file per run and side, kept: the file form of the command renders the same report.
    assert len(list((tmp_path / "head").glob("run-*.json"))) == 3
    args = [str(tmp_path / "base"), str(tmp_path / "head"), "--aa", str(tmp_path / "aa"), "--format", "json"]
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["rows"] == report["rows"]
    assert again["base"]["commits"] == report["base"]["commits"]
