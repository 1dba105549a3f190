"""Report sections of the production page: the cost of storing results, memory per dedup id."""

from __future__ import annotations

import json
from pathlib import Path

from docs_synthetic import make_run, metric

from bench import report


def _render(tmp_path: Path, name: str, doc: dict | None = None) -> str:
    doc = make_run() if doc is None else doc
    path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return report.SECTIONS[name](report.load(tmp_path), "")


def test_result_cost_is_a_ratio_to_the_no_op_case_of_the_same_concurrency(tmp_path: Path) -> None:
    out = _render(tmp_path, "result_cost_section")
    assert "| `None`, `store_results` off | 1,900 (1,862\N{EN DASH}1,938) |" in out
    assert "| a 100 B result, `store_results=True` | 1,520 (1,500\N{EN DASH}1,540) |" in out
    assert "Storing the result costs 20% (ratio 0.80, range 0.78" in out


def test_dedup_memory_names_the_id_size_and_a_million_ids(tmp_path: Path) -> None:
    out = _render(tmp_path, "dedup_memory_section")
    assert "each id of 16 B kept in the window costs 90 B" in out
    assert "a million retained ids take about 85.8 MiB" in out


def test_the_results_case_never_enters_the_no_op_process_table(tmp_path: Path) -> None:
    out = _render(tmp_path, "process_section")
    assert out.count("\n| 32 ") == 1


def test_runs_without_the_cases_say_so(tmp_path: Path) -> None:
    doc = make_run()
    doc["results"] = [r for r in doc["results"]
                      if "result_bytes" not in r["params"] and "id_bytes" not in r["params"]]
    assert "No results yet" in _render(tmp_path / "without", "result_cost_section", doc)
    # a difference inside the threshold or the repetitions' ranges is called noise
    doc = make_run()
    storing = next(r for r in doc["results"] if "result_bytes" in r["params"])
    storing["metrics"]["jobs_per_s_storing_results"] = metric(1880, "1/s")
    assert "within the noise" in _render(tmp_path / "noise", "result_cost_section", doc)
    assert "No results yet" in report.SECTIONS["dedup_memory_section"](
        report.load(tmp_path / "without"), "")
