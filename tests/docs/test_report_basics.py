"""Unit tests of the report layer's foundations (bench/report/): loading and bad input,
statistics and text, figures.

Result documents come from docs_synthetic (schema-valid, built in memory); nothing is read from
results/, and no mkdocs is needed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest
from docs_synthetic import chart_specs, load_docs, make_dragonfly_run, make_run, render

from bench import report
from bench.report import ReportError, compare, figures, text
from bench.report.load import same_method
from bench.results import ResultsError


def write(root: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    path = root / "v1" / "conveyor-0.1.0" / (name or f"{doc['run_id']}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


# ------------------------------------------------------------------ loading and bad input


def test_empty_or_missing_results_give_an_empty_dataset_and_say_so(tmp_path: Path) -> None:
    assert report.load(tmp_path / "absent").empty
    ds = report.load(tmp_path)
    assert ds.empty
    assert "No results yet" in render(ds, "results_status")
    for name in report.SECTIONS:
        render(ds, name)  # every section renders without data


def test_tidy_frame_has_one_row_per_repetition(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run())
    rows = ds.frame[(ds.frame.scenario == "process") & (ds.frame.concurrency == 32)
                    & (ds.frame.config == "default") & (ds.frame.metric == "jobs_per_s")]
    assert sorted(rows.rep) == [0, 1, 2]
    summary = compare.select(ds.summary, scenario="process", concurrency=32, config="default",
                             metric="jobs_per_s")
    assert summary.iloc[0]["median"] == pytest.approx(rows.value.median())
    assert summary.iloc[0]["n"] == 3


def test_summary_mad_is_each_cases_own_median_absolute_deviation(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run())
    keys = [c for c in ds.frame.columns if c not in ("rep", "value")]
    for _, row in ds.summary.sample(40, random_state=1).iterrows():
        same = [ds.frame[k].isna() if pd.isna(row[k]) else ds.frame[k] == row[k] for k in keys]
        values = ds.frame[pd.concat(same, axis=1).fillna(False).all(axis=1)].value
        assert len(values) == row["n"]
        assert row["mad"] == (values - values.median()).abs().median()


def test_select_matches_values_lists_and_absent_parameters() -> None:
    frame = pd.DataFrame({"scenario": ["a", "a", "b", "b"],
                          "callers": pd.array([1, None, 8, 1], dtype="Int64")})
    assert compare.select(frame, scenario="a").index.tolist() == [0, 1]
    assert compare.select(frame, callers=1).index.tolist() == [0, 3]  # NA never equals a value
    assert compare.select(frame, callers=[1, None]).index.tolist() == [0, 1, 3]
    assert compare.select(frame, scenario="b", callers=[8, 1]).index.tolist() == [2, 3]
    assert compare.select(frame, batching=[False, None]).index.tolist() == [0, 1, 2, 3]  # absent
    assert compare.select(frame, batching=False).empty


def test_dataset_memo_computes_once_per_key(tmp_path: Path) -> None:
    ds, calls = load_docs(tmp_path, make_run()), []
    for key in ("a", "a", "b"):
        assert ds.memo((key,), lambda key=key: calls.append(key) or key.upper()) == key.upper()
    assert calls == ["a", "b"]
    assert load_docs(tmp_path / "other", make_run()).memo(("a",), lambda: "fresh") == "fresh"


def test_load_skips_quick_and_schema_dirs_and_sorts_by_time(tmp_path: Path) -> None:
    write(tmp_path, make_run("20261130T000000Z-000002", "2026-11-30T00:00:00Z"))
    write(tmp_path, make_run("20261129T000000Z-000001", "2026-11-29T00:00:00Z"))
    (tmp_path / "quick").mkdir()
    (tmp_path / "quick" / "x.json").write_text(json.dumps(make_run("20261201T000000Z-000003")))
    ds = report.load(tmp_path)
    assert ds.runs.run_id.tolist() == ["20261129T000000Z-000001", "20261130T000000Z-000002"]


@pytest.mark.parametrize("breakage", ["version", "field", "metric"])
def test_a_file_failing_the_schema_stops_naming_the_file(tmp_path: Path, breakage: str) -> None:
    doc = make_run()
    if breakage == "version":
        doc["schema_version"] = 99
    elif breakage == "field":
        del doc["environment"]
    else:
        del doc["results"][0]["metrics"]["p99_ms"]["median"]
    path = write(tmp_path, doc)
    with pytest.raises(ResultsError, match=re.escape(str(path))):
        report.load(tmp_path)


def test_a_duplicate_run_id_stops_naming_both_files_and_the_field(tmp_path: Path) -> None:
    first = write(tmp_path, make_run(), "a.json")
    second = write(tmp_path, make_run(), "b.json")
    with pytest.raises(ReportError) as err:
        report.load(tmp_path)
    assert str(first) in str(err.value) and str(second) in str(err.value)
    assert "run_id" in str(err.value)


def test_mixed_methods_in_one_comparison_stop_naming_files_and_field(tmp_path: Path) -> None:
    other = make_run("20261130T000000Z-000009", "2026-11-30T00:00:00Z")
    other["method"]["repetitions"] = 9
    ds = load_docs(tmp_path, make_run(), other)
    with pytest.raises(ReportError, match=r"000009\.json.*method\.repetitions"):
        same_method(ds, ds.runs.run_id.tolist(), "test")


# ------------------------------------------------------------------ statistics and text


@pytest.mark.parametrize(("value", "shown"), [
    (None, text.MISSING), (0, "0"), (0.01234, "0.0123"), (1.5, "1.50"), (12.34, "12.3"),
    (123.4, "123"), (12345.6, "12,300"), (12346.0, "12,346"), (200.0, "200"), (4.0, "4"),
])
def test_fmt(value: float | None, shown: str) -> None:
    assert text.fmt(value) == shown


@pytest.mark.parametrize(("median", "mad", "shown"), [
    (163.0, 0.0696, "163 ± 0.04%"),  # would be "163 ± 0": shown as a share instead
    (0.141, 0.000926, "0.141 ± 0.001"),
    (6853.6, 50.4, "6,850 ± 50"),
    (100.0, 0.0, "100"),
])
def test_mad_is_shown_at_the_precision_of_its_median(median: float, mad: float,
                                                     shown: str) -> None:
    assert text.fmt_stat(median, mad, n=7) == shown


def test_whole_counts_with_a_range_stay_whole() -> None:
    # connections per worker process over 3 repetitions, 4, 4 and 5: shown as "4.00 (4.00-5.00)"
    assert text.fmt_stat(4.0, 0.0, 3, 4.0, 5.0) == "4 (4\u20135)"
    assert text.fmt_stat(11.0, 0.0, 3, 11.0, 12.0) == "11.0 (11.0\u201312.0)".replace(".0", "")
    assert text.fmt_stat(4.5, 0.5, 3, 4.0, 5.0) == "4.50 (4.00\u20135.00)"  # not whole: 3 digits


def test_few_repetitions_show_their_range_not_a_mad_that_hides_the_outer_one() -> None:
    """Three repetitions 100, 101 and 150: the MAD is 1, and "101 ± 1" hid the 150."""
    assert text.fmt_stat(101.0, 1.0, n=3, lo=100.0, hi=150.0) == "101 (100\N{EN DASH}150)"
    assert text.fmt_stat(0.141, 0.001, n=5, lo=0.1404, hi=0.1523) == "0.141 (0.140\N{EN DASH}0.152)"
    assert text.fmt_stat(101.0, 1.0, n=7, lo=100.0, hi=150.0) == "101 ± 1"  # enough for a MAD
    assert text.fmt_stat(100.0, 0.0, n=3, lo=100.0, hi=100.0) == "100"


@pytest.mark.parametrize(("metric", "unit", "label"), [
    ("jobs_per_s", "1/s", "throughput (jobs/s)"), ("p99_9_ms", "ms", "p99.9 (ms)"),
    ("bytes_per_job", "B", "memory (B/job)"), ("lifecycles_per_s", "1/s",
                                                "throughput (lifecycles/s)"),
])
def test_units_are_written_as_people_write_them(metric: str, unit: str, label: str) -> None:
    assert text.metric_label(metric, unit) == label


def test_md_table_escapes_pipes() -> None:
    table = text.md_table(pd.DataFrame({"a": ["x|y"], "b": [1]}))
    assert "x\\|y" in table and table.splitlines()[0].startswith("| a")


def test_ratio_within_the_ranges_is_noise_and_apart_is_not() -> None:
    row = lambda m, lo, hi: pd.Series({"median": m, "min": lo, "max": hi})  # noqa: E731
    assert compare.ratio(row(105, 95, 115), row(100, 90, 110))["noise"]
    found = compare.ratio(row(150, 140, 160), row(100, 90, 110))
    assert not found["noise"] and found["ratio"] == 1.5
    assert found["lo"] == pytest.approx(140 / 110) and found["hi"] == pytest.approx(160 / 90)


def test_a_small_difference_with_the_ranges_apart_is_not_called_noise() -> None:
    # 5% apart with no overlap: below the 10% called out, but not noise either.
    row = lambda m, lo, hi: pd.Series({"median": m, "min": lo, "max": hi})  # noqa: E731
    small = compare.ratio(row(105, 104, 106), row(100, 99, 101))
    assert small["noise"] and not small["overlap"]
    assert compare.change(small) == "within 10% (gains 5.0%, ranges apart)"
    assert compare.ratio_text(small).endswith(", within 10%")
    overlapping = compare.ratio(row(105, 95, 115), row(100, 90, 110))
    assert overlapping["overlap"] and compare.change(overlapping) == "within the noise"
    assert compare.ratio_text(overlapping).endswith(", noise")


# ------------------------------------------------------------------ figures


def test_a_chart_with_two_traces_of_one_label_is_refused() -> None:
    fig = go.Figure([go.Bar(x=["a"], y=[1], name="baseline"), go.Bar(x=["a"], y=[2],
                                                                    name="baseline")])
    with pytest.raises(ReportError, match="unique"):
        figures.chart(fig, "x")


def test_a_stacked_bar_chart_is_refused() -> None:
    fig = go.Figure([go.Bar(x=["a"], y=[1], name="one"), go.Bar(x=["a"], y=[2], name="two")])
    fig.update_layout(barmode="stack")
    with pytest.raises(ReportError, match="grouped"):
        figures.chart(fig, "x")


def test_a_trace_with_two_values_at_one_x_is_refused() -> None:
    fig = go.Figure([go.Bar(x=["baseline", "baseline"], y=[5651, 62078], name="1 producer")])
    with pytest.raises(ReportError, match="two values at one x"):
        figures.chart(fig, "x")


def test_every_rendered_chart_has_unique_labels_and_no_stacking(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run(), make_dragonfly_run())
    specs = [s for name in report.SECTIONS for s in chart_specs(render(ds, name))]
    assert len(specs) >= 10
    for spec in specs:
        names = [t["name"] for t in spec["data"]]
        assert len(set(names)) == len(names), names
        assert spec["layout"].get("barmode", "group") == "group"
        assert not any("`" in n for n in names)
