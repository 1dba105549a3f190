"""`python -m bench.compare` on result files: verdicts end to end, and one-line errors on bad input."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.compare.build import group_requirements, resolve, suite_changes
from bench.compare.cli import main, parser, session_params
from bench.compare.session import round_order
from bench.results import RESULTS_DIR, load_results
from bench.stats import summarize

REPO = Path(__file__).resolve().parents[2]
BROKEN_PYPROJECT = (
    '[build-system]\nrequires = []\nbuild-backend = "no_such_backend_module"\n'
    '[project]\nname = "conveyor"\nversion = "0"\n[dependency-groups]\nbench = []\n'
)


def template() -> dict[str, Any]:
    """A committed result document, to keep every field the schema requires."""
    needed = {"process", "reference", "memory"}
    docs = [d for d in load_results(RESULTS_DIR / "v1") if needed <= {r["scenario"] for r in d["results"]}]
    return copy.deepcopy(docs[0])


def synthetic(factor: float, n: int = 8, seed: int = 0, scenarios: tuple[str, ...] = ("process",)) -> dict:
    """A valid document whose rows of ``scenarios`` hold ``n`` jittered values times ``factor``."""
    doc = template()
    rng = random.Random(seed)
    rows = [r for r in doc["results"] if r["scenario"] in scenarios][:4]
    for row in rows:
        for name, metric in row["metrics"].items():
            values = [metric["median"] * factor * (1 + rng.uniform(-0.01, 0.01)) for _ in range(n)]
            row["metrics"][name] = summarize(values, metric["unit"])
        row["method"]["repetitions"] = n
    doc["results"] = rows
    doc["failures"] = []
    return doc


def write(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_injected_slowdown_is_reported_slower(tmp_path: Path, capsys) -> None:
    base = write(tmp_path, "base.json", synthetic(1.0, seed=1))
    head = write(tmp_path, "head.json", synthetic(0.8, seed=2))
    code, out, _ = run(capsys, base, head, "--format", "json")
    assert code == 0
    report = json.loads(out)
    rows = [r for r in report["rows"] if r["metric"] == "jobs_per_s"]
    assert rows and all(r["verdict"] == "slower" and r["p_value"] < 0.01 for r in rows)
    assert all(r["diff_pct"] == pytest.approx(-20, abs=2) for r in rows)
    assert all(len(r["values"]["base"]) == len(r["values"]["head"]) == 8 for r in rows)
    assert report["summary"]["regressed"] >= len(rows)
    assert report["method"]["interleaved"] is False


def test_markdown_report_layout(tmp_path: Path, capsys) -> None:
    base = write(tmp_path, "base.json", synthetic(1.0, seed=1, scenarios=("process", "reference", "memory")))
    head = write(tmp_path, "head.json", synthetic(0.8, seed=2, scenarios=("process", "reference", "memory")))
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert out.startswith("## Conveyor performance")
    assert "**Machine:**" in out and "| Conveyor |" in out
    assert "### Machine check: reference ceilings" in out
    header, _, _ = out.partition("### Machine check")
    assert "| reference |" not in header
    assert "| higher |" in header and "🔴 slower" in header


def test_identical_inputs_are_within_noise(tmp_path: Path, capsys) -> None:
    doc = synthetic(1.0, seed=3)
    code, out, _ = run(capsys, write(tmp_path, "a.json", doc), write(tmp_path, "b.json", doc),
                       "--format", "json")
    report = json.loads(out)
    assert code == 0
    assert report["summary"]["regressed"] == report["summary"]["improved"] == 0
    assert {r["verdict"] for r in report["rows"]} <= {"within noise", "not judged"}


def test_two_percent_change_is_not_flagged(tmp_path: Path, capsys) -> None:
    base = write(tmp_path, "a.json", synthetic(1.0, seed=4))
    head = write(tmp_path, "b.json", synthetic(1.02, seed=5))
    code, out, _ = run(capsys, base, head, "--format", "json")
    assert code == 0
    assert json.loads(out)["summary"]["regressed"] == 0


def assert_one_line_error(code: int, err: str, needle: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("compare: error:") and needle in lines[0]
    assert "Traceback" not in err


def test_different_schema_versions_are_refused(tmp_path: Path, capsys) -> None:
    newer = synthetic(1.0)
    newer["schema_version"] = 2
    code, _, err = run(capsys, write(tmp_path, "a.json", synthetic(1.0)), write(tmp_path, "b.json", newer))
    assert_one_line_error(code, err, "schema versions differ")


def test_non_overlapping_scenarios_are_refused(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, write(tmp_path, "a.json", synthetic(1.0, scenarios=("process",))),
                       write(tmp_path, "b.json", synthetic(1.0, scenarios=("memory",))))
    assert_one_line_error(code, err, "no scenario measured on both sides")


def test_same_scenario_with_other_sizes_is_refused_naming_them(tmp_path: Path, capsys) -> None:
    other = synthetic(1.0)
    for row in other["results"]:
        row["params"]["payload_bytes"] = 999
    code, _, err = run(capsys, write(tmp_path, "a.json", synthetic(1.0)), write(tmp_path, "b.json", other))
    assert_one_line_error(code, err, "no case measured on both sides: process ran as")
    assert "999" in err and "--suite head" in err


def test_fewer_than_three_repetitions_are_refused(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, write(tmp_path, "a.json", synthetic(1.0)),
                       write(tmp_path, "b.json", synthetic(1.0, n=2)))
    assert_one_line_error(code, err, "head has 2 run(s), at least 3 needed")


def test_unknown_revision_is_refused(capsys) -> None:
    code, _, err = run(capsys, "HEAD", "no-such-revision-xyz")
    assert_one_line_error(code, err, "unknown revision 'no-such-revision-xyz'")


def test_mixing_a_file_and_a_revision_is_refused(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, write(tmp_path, "a.json", synthetic(1.0)), "HEAD")
    assert_one_line_error(code, err, "both be result files")


def test_too_few_runs_option_is_refused(capsys) -> None:
    code, _, err = run(capsys, "HEAD", "HEAD", "--runs", "2")
    assert_one_line_error(code, err, "at least 3 runs")


def test_resolve_and_groups() -> None:
    assert len(resolve("HEAD").commit) == 40
    pyproject = {"dependency-groups": {"a": ["x"], "b": [{"include-group": "a"}, "y"]}}
    assert group_requirements(pyproject, "b") == ["x", "y"]


def test_round_order_rotates_every_side_through_every_position() -> None:
    sides = ("base", "head", "aa")
    orders = [round_order(i, sides) for i in range(3)]
    assert orders[0] == ["base", "head", "aa"]
    for position in range(3):
        assert {o[position] for o in orders} == set(sides)


def test_session_params_keep_short_memory_defaults_unless_overridden() -> None:
    args = parser().parse_args(["a", "b"])
    assert any(p.startswith("memory.counts=") for p in session_params(args))
    args = parser().parse_args(["a", "b", "--param", "memory.counts=[5]"])
    assert [p for p in session_params(args) if p.startswith("memory.counts")] == ["memory.counts=[5]"]
    args = parser().parse_args(["a", "b", "--scenarios", "process"])
    assert session_params(args) == []


def test_suite_changes_between_a_commit_and_itself_is_zero() -> None:
    head = resolve("HEAD")
    assert suite_changes(head, head) == 0


def broken_commit(tmp_path: Path) -> str:
    """A commit object (on no branch) whose pyproject names a build backend that does not exist."""
    def git(*args: str, stdin: str | None = None) -> str:
        env = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "index"), "GIT_AUTHOR_NAME": "t",
               "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        return subprocess.run(["git", *args], cwd=REPO, env=env, input=stdin, capture_output=True,
                              text=True, check=True).stdout.strip()

    blob = git("hash-object", "-w", "--stdin", stdin=BROKEN_PYPROJECT)
    git("read-tree", "HEAD")
    git("update-index", "--add", "--cacheinfo", f"100644,{blob},pyproject.toml")
    return git("commit-tree", git("write-tree"), "-p", "HEAD", "-m", "test: does not build")


def test_revision_that_does_not_build_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("bench.compare.build.ENV_CACHE", tmp_path / "envs")
    commit = broken_commit(tmp_path)
    code, _, err = run(capsys, "HEAD", commit, "--workdir", tmp_path / "work")
    lines = [line for line in err.splitlines() if line.startswith("compare: error:")]
    assert code == 2 and "Traceback" not in err
    assert lines == [lines[0]] and f"revision '{commit}' ({commit[:10]}) does not build" in lines[0]
