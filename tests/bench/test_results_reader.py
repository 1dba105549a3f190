"""The results reader/writer: schema validation, unknown versions, credentials."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import environment, results
from bench.stats import latency_summary, mad, percentile, summarize


def minimal_doc() -> dict[str, Any]:
    """A small valid document."""
    metric = summarize([1.0, 2.0, 4.0], "1/s")
    return {
        "schema_version": 1, "run_id": "20261129T201500Z-ab12cd",
        "created_utc": "2026-11-29T20:15:00Z", "conveyor_version": "0.1.0",
        "git": {"commit": None, "dirty": None}, "command": ["python", "-m", "bench"],
        "environment": {"python": "3.11.7", "implementation": "CPython", "os": "Linux",
                        "kernel": "6", "cpu_model": "x", "cores": 2, "memory_bytes": 1,
                        "machine_label": "m"},
        "clients": {"redis_py": "8.1.0", "hiredis": None, "conveyor": "0.1.0"},
        "method": {"repetitions": 3, "warmup": 1, "process_per_repetition": True,
                   "quick": False, "statistics": "median"},
        "servers": [{"id": "valkey-9.1", "family": "valkey", "version": "9.1.2",
                     "allocator": "libc", "measured": True, "reason": None, "command": None,
                     "url": "redis://user:secret@127.0.0.1:1/0",
                     "configs": {"default": {"flags": ["--requirepass", "secret"]}}}],
        "results": [{"scenario": "process", "server": "valkey-9.1", "config": "default",
                     "protocol": 3, "parser": "hiredis", "params": {"jobs": 10},
                     "metrics": {"jobs_per_s": metric},
                     "exactly_once": {"enqueued": 10, "acked": 10, "duplicates": 0, "lost": 0,
                                      "ok": True},
                     "extra": {}}],
    }


def test_write_then_load_round_trip_strips_credentials(tmp_path: Path) -> None:
    path = results.write_results(minimal_doc(), tmp_path)
    assert path == tmp_path / "v1" / "conveyor-0.1.0" / "20261129T201500Z-ab12cd.json"
    text = path.read_text()
    assert "secret" not in text
    [doc] = results.load_results(tmp_path)
    assert doc["servers"][0]["url"] == "redis://127.0.0.1:1/0"
    assert results.load_results(path) == [doc]


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_reader_refuses_unknown_schema_version_naming_the_file(tmp_path: Path, version) -> None:
    doc = minimal_doc()
    doc["schema_version"] = version
    path = tmp_path / "v9" / "future.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    with pytest.raises(results.UnknownSchemaVersion) as err:
        results.load_results(tmp_path)
    assert str(path) in str(err.value)
    assert "schema_version" in str(err.value)


def test_invalid_document_names_file_and_field(tmp_path: Path) -> None:
    doc = results.strip_credentials(minimal_doc())
    del doc["results"][0]["exactly_once"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(results.InvalidResults, match=r"(?s)bad\.json.*exactly_once"):
        results.load_file(path)


def test_failed_exactly_once_cannot_be_stored_as_a_figure() -> None:
    doc = copy.deepcopy(minimal_doc())
    doc["servers"][0]["url"] = None
    doc["results"][0]["exactly_once"].update(duplicates=1, ok=False)
    with pytest.raises(results.InvalidResults):
        results.validate(doc, "x.json")


def test_validate_refuses_credentials_left_in_a_document() -> None:
    with pytest.raises(results.InvalidResults, match="credentials"):
        results.validate(minimal_doc(), "x.json")


def test_statistics() -> None:
    assert mad([1, 2, 3, 4, 100]) == 1
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([0, 10], 99.9) == pytest.approx(9.99)
    lat = latency_summary([0.001, 0.002, 0.003], (50, 99.9))
    assert lat["p50_ms"] == pytest.approx(2.0)
    assert set(lat) == {"p50_ms", "p99_9_ms", "max_ms"}
    m = summarize([3, 1, 2], "s")
    assert (m["median"], m["min"], m["max"], m["values"]) == (2, 1, 3, [3.0, 1.0, 2.0])


def test_git_state_records_which_tracked_files_were_changed(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True)

    for name in ("queue/a.py", "docs/b.md", "c d.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("v1")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    monkeypatch.setattr(environment, "REPO_ROOT", tmp_path)
    assert environment.git_state()["changed"] == [] and environment.git_state()["dirty"] is False
    (tmp_path / "queue/a.py").write_text("v2")
    (tmp_path / "c d.txt").write_text("v2")
    (tmp_path / "untracked.py").write_text("not tracked: not a change of the measured code")
    (tmp_path / "bench.py").write_text("staged, not committed")
    git("add", "bench.py")
    state = environment.git_state()
    assert state["dirty"] is True and state["changed"] == ["bench.py", "c d.txt", "queue/a.py"]
    [doc] = results.load_results(results.write_results({**minimal_doc(), "git": state}, tmp_path / "out"))
    assert doc["git"]["changed"] == state["changed"]  # the schema takes it
