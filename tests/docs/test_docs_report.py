"""Unit tests of bench/report.py: loading, formatting, charts, takeaways, sections.

Result documents are built here (small dicts) or by docs_synthetic.make_run; nothing is read
from results/.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from docs_synthetic import make_run, metric, row

from bench.report import _legacy as report
from bench.results import ResultsError

RUN_ID = "20261129T201500Z-ab12cd"


def write(root: Path, doc: dict[str, Any], rel: str | None = None) -> Path:
    """Write ``doc`` under ``root`` as a result file; return its path."""
    path = root / (rel or f"v1/conveyor-0.1.0/{doc['run_id']}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def dataset(*docs: dict[str, Any], root: Path = Path("/r")) -> report.Dataset:
    """A Dataset from in-memory documents (no files)."""
    runs = [report.RunFile(rel=f"v1/conveyor-0.1.0/{d['run_id']}.json", doc=d,
                           rows=tuple(report.Row.from_json(r) for r in d["results"]))
            for d in docs]
    runs.sort(key=lambda r: (r.created, r.run_id))
    return report.Dataset(root=root, files=tuple(runs))


def stat(median: float, lo: float | None = None, hi: float | None = None) -> report.Stat:
    """A Stat with the given median and range."""
    lo = median if lo is None else lo
    hi = median if hi is None else hi
    return report.Stat(median, 0.0, lo, hi, "1/s", (lo, median, hi))


# ------------------------------------------------------------------ loading


def test_missing_or_empty_results_dir_gives_empty_dataset(tmp_path: Path) -> None:
    assert report.load(tmp_path / "absent").empty
    (tmp_path / "schema").mkdir()
    (tmp_path / "schema" / "v1.json").write_text("{}")
    assert report.load(tmp_path).empty


def test_load_skips_quick_and_schema_and_sorts_by_time(tmp_path: Path) -> None:
    late = make_run(run_id="20261130T000000Z-000002", created="2026-11-30T00:00:00Z")
    early = make_run(run_id="20261129T000000Z-000001", created="2026-11-29T00:00:00Z")
    write(tmp_path, late)
    write(tmp_path, early)
    write(tmp_path, make_run(run_id="20261201T000000Z-000003"), "quick/x.json")
    ds = report.load(tmp_path)
    assert [r.run_id for r in ds.files] == [early["run_id"], late["run_id"]]
    assert ds.latest().run_id == late["run_id"]
    assert ds.files[0].url == f"results/v1/conveyor-0.1.0/{early['run_id']}.json"


def test_unknown_schema_version_fails_naming_the_file(tmp_path: Path) -> None:
    doc = make_run()
    doc["schema_version"] = 99
    path = write(tmp_path, doc)
    with pytest.raises(ResultsError, match=str(path)):
        report.load(tmp_path)


def test_missing_field_fails_naming_the_file(tmp_path: Path) -> None:
    doc = make_run()
    del doc["environment"]
    path = write(tmp_path, doc)
    with pytest.raises(ResultsError, match=str(path)):
        report.load(tmp_path)


def test_missing_metric_field_fails_naming_the_file(tmp_path: Path) -> None:
    doc = make_run()
    del doc["results"][0]["metrics"]["p99_ms"]["median"]
    path = write(tmp_path, doc)
    with pytest.raises(ResultsError, match=str(path)):
        report.load(tmp_path)


# ------------------------------------------------------------------ formatting


@pytest.mark.parametrize(("value", "text"), [
    (None, report.MISSING), (0, "0"), (0.01234, "0.0123"), (1.5, "1.50"), (12.34, "12.3"),
    (123.4, "123"), (12345.6, "12,346"), (200.0, "200"),
])
def test_fmt(value: float | None, text: str) -> None:
    assert report.fmt(value) == text


def test_fmt_stat_shows_mad_only_with_repetitions() -> None:
    assert report.fmt_stat(report.Stat(100.0, 5.0, 95, 105, "1/s", (95, 100, 105))) == "100 ± 5.00"
    assert report.fmt_stat(report.Stat(100.0, 0.0, 100, 100, "1/s", (100,))) == "100"


def test_md_table_escapes_pipes() -> None:
    table = report.md_table(["a", "b"], [["x|y", 1]])
    assert table.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | 1 |"]


def test_admonition_indents_body() -> None:
    text = report.admonition("note", "T", "line 1\n\nline 2")
    assert text == '!!! note "T"\n\n    line 1\n\n    line 2\n'


def test_source_line_names_run_date_machine_and_links_json() -> None:
    run = dataset(make_run(quick=True)).files[0]
    line = report.source_line(run, "../")
    assert RUN_ID in line and "2026-11-29T20:15:00Z" in line and "synthetic" in line
    assert f"(../results/v1/conveyor-0.1.0/{RUN_ID}.json)" in line
    assert "quick run" in line


# ------------------------------------------------------------------ charts


def test_chart_html_is_data_only_and_deterministic() -> None:
    chart = report.Chart("x-1", "t", "x", "y", (report.Series('a "q"', (1, 2), (3.0, 4.0)),))
    html1, html2 = report.chart_html(chart), report.chart_html(chart)
    assert html1 == html2
    assert html1.startswith('<div class="cv-chart" id="chart-x-1" data-cv-chart="')
    assert "<script" not in html1 and '"q"' not in html1  # quotes are escaped
    spec = report.chart_spec(chart)
    assert spec["data"][0]["y"] == [3.0, 4.0]


def test_log_axis_gets_tick_values() -> None:
    chart = report.Chart("c", "t", "x", "y", (report.Series("a", (1, 8, 32), (1.0, 2.0, 3.0)),),
                         x_type="log")
    assert report.chart_spec(chart)["layout"]["xaxis"]["tickvals"] == [1, 8, 32]


def test_auto_chart_series_per_payload() -> None:
    rows = [report.Row.from_json(r) for r in make_run()["results"]
            if r["scenario"] == "lifecycle" and r["server"] == "valkey-9.1"
            and r["config"] == "default" and r["parser"] == "hiredis" and r["protocol"] == 3]
    chart = report.auto_chart("l", "t", rows, "lifecycles_per_s")
    assert chart is not None
    assert [s.name for s in chart.series] == ["payload 64 B", "payload 16384 B"]
    assert chart.series[0].x == (1, 8, 32) and chart.x_type == "log"


# ------------------------------------------------------------------ comparisons & takeaways


def test_clearly_greater_needs_threshold_and_disjoint_ranges() -> None:
    assert report.clearly_greater(stat(120, 118, 122), stat(100, 98, 102))
    assert not report.clearly_greater(stat(105, 104, 106), stat(100, 99, 101))  # below 10%
    assert not report.clearly_greater(stat(120, 90, 150), stat(100, 95, 105))  # overlap


def lifecycle_rows(points: list[tuple[int, int, float, float]]) -> list[report.Row]:
    """Rows from (payload, concurrency, rate, p99)."""
    return [report.Row.from_json(row(
        "lifecycle", {"payload_bytes": p, "concurrency": c, "tasks": 10},
        {"lifecycles_per_s": metric(rate, "1/s", spread=0.01), "p99_ms": metric(p99, "ms",
                                                                              spread=0.01)}))
        for p, c, rate, p99 in points]


def test_concurrency_takeaway_when_data_supports_it() -> None:
    rows = lifecycle_rows([(64, 1, 300, 1.0), (64, 8, 900, 2.0), (64, 32, 1000, 8.0)])
    (text,) = report.concurrency_takeaways(rows, "lifecycles_per_s")
    assert "concurrency 8 gives 90% of the throughput of concurrency 32" in text


def test_no_concurrency_takeaway_when_throughput_share_is_low() -> None:
    rows = lifecycle_rows([(64, 8, 500, 2.0), (64, 32, 1000, 8.0)])
    assert report.concurrency_takeaways(rows, "lifecycles_per_s") == []


def test_no_concurrency_takeaway_when_p99_is_not_lower() -> None:
    rows = lifecycle_rows([(64, 8, 950, 8.0), (64, 32, 1000, 8.1)])
    assert report.concurrency_takeaways(rows, "lifecycles_per_s") == []


def test_payload_takeaway_only_beyond_noise() -> None:
    costly = lifecycle_rows([(64, 8, 1000, 1), (16384, 8, 500, 1)])
    assert "16384 B payloads run at 50% at concurrency 8" in report.payload_takeaways(
        costly, "lifecycles_per_s")[0]
    flat = lifecycle_rows([(64, 8, 1000, 1), (16384, 8, 980, 1)])
    assert report.payload_takeaways(flat, "lifecycles_per_s") == []


def test_takeaways_computed_from_synthetic_run() -> None:
    text = report.performance_takeaways(dataset(make_run()))
    assert "concurrency 8 gives 90%" in text
    assert "python parser" in text
    assert "enqueue_many" in text


def test_no_takeaway_sentence_when_nothing_differs() -> None:
    doc = make_run()
    doc["results"] = [r for r in doc["results"] if r["scenario"] == "reference"]
    text = report.performance_takeaways(dataset(doc))
    assert "No takeaway is supported" in text


# ------------------------------------------------------------------ sections


def test_every_section_handles_empty_results() -> None:
    empty = report.Dataset(root=Path("/nowhere"), files=())
    for name, section in report.SECTIONS.items():
        text = section(empty, "")
        assert isinstance(text, str), name
        assert "cv-chart" not in text, name
    assert "nox -s bench" in report.status(empty)
    assert "No results yet" in report.lifecycle_section(empty)


def test_every_section_renders_synthetic_run() -> None:
    ds = dataset(make_run())
    for name, section in report.SECTIONS.items():
        text = section(ds, "")
        assert "No results yet" not in text or name == "results_status", name
    assert report.status(ds) == ""


def test_servers_section_keeps_unmeasured_server_with_reason_and_command() -> None:
    text = report.servers_section(dataset(make_run()))
    line = next(x for x in text.splitlines() if x.startswith("| dragonfly"))
    assert "not measured" in line and "DRAGONFLY_BIN" in line and "nox -s bench" in line
    assert "800 (0.80x)" in text  # redis-7.0 lifecycle relative to valkey-9.1
    assert 'id="chart-servers"' in text


def test_memory_section_recommends_1024_only_when_it_saves() -> None:
    text = report.memory_section(dataset(make_run()))
    assert "| 1024 | 1,500 | 1,100 | -27% |" in text
    assert "**Recommendation:**" in text and "1024 B (27% less)" in text
    doc = make_run()
    for r in doc["results"]:
        if r["scenario"] == "memory":
            r["metrics"]["bytes_per_job"] = metric(500, "B", spread=0.0, reps=1)
    assert "no payload size shows a memory difference" in report.memory_section(dataset(doc))


def test_persistence_section_flags_always_and_not_everysec() -> None:
    text = report.persistence_section(dataset(make_run()))
    assert "`appendfsync always` costs throughput: 20% of persistence off" in text
    assert "`appendfsync everysec` is within noise" in text


def test_calculator_uses_measured_roles_or_asks_for_inputs() -> None:
    measured = report.calculator(dataset(make_run()))
    assert 'name="per_worker_input"' not in measured
    assert "pump 1 + waiter 1 + maint 1 + other 2" in measured
    assert "not measured yet: an input" in measured  # bytes per connection not in results
    doc = make_run()
    doc["results"] = [r for r in doc["results"] if r["scenario"] != "connections"]
    assert 'name="per_worker_input"' in report.calculator(dataset(doc))


def test_exhaustion_section_quotes_recorded_error() -> None:
    text = report.exhaustion_section(dataset(make_run()))
    assert "ConnectionError: No connection available." in text
    assert "7 calls failed" in text


def test_dragonfly_not_measured_shows_reason() -> None:
    text = report.dragonfly_section(dataset(make_run()))
    assert "Dragonfly not measured" in text and "DRAGONFLY_BIN" in text


def test_dragonfly_measured_compares_lock_modes() -> None:
    doc = make_run()
    entry = next(s for s in doc["servers"] if s["id"] == "dragonfly")
    entry.update(measured=True, reason=None, command=None, version="1.40.1",
                 configs={"default": {"flags": ["--lock_on_hashtags"]},
                          "global-lock": {"flags": ["--default_lua_flags=allow-undeclared-keys"]}})
    params = {"payload_bytes": 64, "concurrency": 8, "tasks": 100}
    for config, rate in (("default", 900.0), ("global-lock", 100.0)):
        doc["results"].append(row("lifecycle", dict(params),
                                  {"lifecycles_per_s": metric(rate, "1/s")},
                                  server="dragonfly", config=config))
    text = report.dragonfly_section(dataset(doc))
    assert "0.11x" in text and "--lock_on_hashtags" in text


def test_quick_run_is_flagged_where_figures_are_quoted() -> None:
    ds = dataset(make_run(quick=True))
    assert "Quick run" in report.headline(ds) and "Quick run" in report.servers_section(ds)


def test_sections_only_use_the_newest_file_with_the_scenario() -> None:
    old = make_run(run_id="20261101T000000Z-000001", created="2026-11-01T00:00:00Z")
    new = copy.deepcopy(old)
    new.update(run_id="20261102T000000Z-000002", created_utc="2026-11-02T00:00:00Z")
    new["results"] = [r for r in new["results"] if r["scenario"] != "memory"]
    ds = dataset(old, new)
    assert "20261102T000000Z-000002" in report.lifecycle_section(ds)
    assert "20261101T000000Z-000001" in report.memory_section(ds)


def test_runs_and_environments_list_every_file() -> None:
    ds = dataset(make_run())
    assert f"[`{RUN_ID}`](results/v1/conveyor-0.1.0/{RUN_ID}.json)" in report.runs_section(ds)
    env = report.environments_section(ds)
    assert env.startswith(f'??? abstract "Run {RUN_ID}') and "Test CPU" in env
    assert "python -m bench" in report.commands_section(ds)


def test_maintenance_tradeoff_in_numbers() -> None:
    text = report.maintenance_section(dataset(make_run()))
    assert "**Tradeoff measured here** (backlog 1000): batch 1000 promotes 10.0x faster" in text
    assert "PING p99 from 0.22 to 2.20 ms" in text
    rows = [report.Row.from_json(row("maintenance", {"backlog": 10, "batch": b},
                                     {"items_per_s": metric(100, "1/s")})) for b in (10, 100)]
    assert "less than the noise threshold" in report.maintenance_advice(rows)


def test_variants_without_baseline_row_say_so() -> None:
    doc = make_run()
    doc["results"] = [r for r in doc["results"] if not (
        r["scenario"] == "lifecycle" and r["config"] == "default" and r["protocol"] == 3
        and r["parser"] == "hiredis" and r["params"]["concurrency"] == 8)]
    text = report.variants_table(dataset(doc).files[0], "lifecycle", ["lifecycles_per_s"])
    assert "no baseline row at these parameters" in text


def test_role_fit_over_concurrency() -> None:
    assert report.fit_line([(1, 3.0), (3, 7.0)]) == pytest.approx((1.0, 2.0))
    assert report.fit_line([(32, 4.0)]) == (4.0, 0.0)
    rows = [report.Row.from_json(row("connections", {"kind": "roles", "concurrency": c},
                                     {"connections_pump": metric(1, "count", reps=1),
                                      "connections_other": metric(c / 8, "count", reps=1)}))
            for c in (8, 32)]
    fits = {f.role: f for f in report.role_fits(rows)}
    assert fits["pump"] == report.RoleFit("pump", 1.0, 0.0)
    assert fits["other"].per_concurrency == pytest.approx(0.125)
    assert "other 0 + 0.125 x concurrency" in report.formula_text(list(fits.values()))


def test_ceiling_ratio_divides_process_by_the_evalsha_ceiling_of_the_same_run() -> None:
    run = dataset(make_run()).latest("process")
    assert run is not None
    rows = report.ceiling_rows(run)
    assert len(rows) == 1
    _server, conc, rate, ceiling, ratio = rows[0]
    assert conc == 32
    expected = float(rate.replace(",", "")) / float(ceiling.replace(",", ""))
    assert ratio == f"{expected:.2f}x"
