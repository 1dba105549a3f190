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


def _with_listing(doc: dict) -> dict:
    from docs_synthetic import row  # noqa: PLC0415

    for keys, parked, page, probe in ((1000, False, 0.4, 0.5), (1000, True, 6.0, 3.0),
                                      (50000, True, 60.0, 5.2)):
        doc["results"].append(row("listing", {"limit_keys": keys, "parked": parked, "pages": 20},
                                  {"page_p50_ms": metric(page, "ms"), "page_max_ms": metric(page * 2, "ms"),
                                   "probe_p50_ms": metric(0.1, "ms"), "probe_p99_ms": metric(probe / 2, "ms"),
                                   "probe_max_ms": metric(probe, "ms")},
                                  extra={"probe_samples": 400}))
    return doc


def test_listing_cost_is_a_row_per_key_count_and_parked_state(tmp_path: Path) -> None:
    out = _render(tmp_path, "listing_section", _with_listing(make_run()))
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines() if line.startswith("| ")]
    assert cells[0] == ["limit keys", "parked jobs", "page p50 (ms)", "page max (ms)", "PING p99 (ms)",
                        "slowest PING (ms)"]
    rows = [c[:2] for c in cells[1:]]
    assert rows == [["1,000", "none"], ["1,000", "one per key"], ["50,000", "one per key"]]
    assert cells[3][5].startswith("5.20 (")  # the slowest PING with its spread
    # a run without the scenario says so
    assert "No results yet" in _render(tmp_path / "without", "listing_section")
