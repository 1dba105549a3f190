"""Unit tests of the report layer (bench/report/): loading, statistics, text, figures, sections.

Result documents come from docs_synthetic (schema-valid, built in memory); nothing is read from
results/, and no mkdocs is needed.
"""

from __future__ import annotations

import copy
import html
import json
import re
from importlib import import_module
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest
from conveyor import QueueSettings
from docs_synthetic import make_dragonfly_run, make_run, metric

from bench import report
from bench.report import ReportError, common, compare, connections, figures, servers, text
from bench.report.load import Dataset, same_method
from bench.results import ResultsError


def write(root: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    path = root / "v1" / "conveyor-0.1.0" / (name or f"{doc['run_id']}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def dataset(tmp_path: Path, *docs: dict[str, Any]) -> Dataset:
    for doc in docs:
        write(tmp_path, doc)
    return report.load(tmp_path)


def render(ds: Dataset, name: str) -> str:
    return report.SECTIONS[name](ds, "")


# ------------------------------------------------------------------ loading and bad input


def test_empty_or_missing_results_give_an_empty_dataset_and_say_so(tmp_path: Path) -> None:
    assert report.load(tmp_path / "absent").empty
    ds = report.load(tmp_path)
    assert ds.empty
    assert "No results yet" in render(ds, "results_status")
    for name in report.SECTIONS:
        render(ds, name)  # every section renders without data


def test_tidy_frame_has_one_row_per_repetition(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    rows = ds.frame[(ds.frame.scenario == "process") & (ds.frame.concurrency == 32)
                    & (ds.frame.config == "default") & (ds.frame.metric == "jobs_per_s")]
    assert sorted(rows.rep) == [0, 1, 2]
    summary = compare.select(ds.summary, scenario="process", concurrency=32, config="default",
                             metric="jobs_per_s")
    assert summary.iloc[0]["median"] == pytest.approx(rows.value.median())
    assert summary.iloc[0]["n"] == 3


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
    ds = dataset(tmp_path, make_run(), other)
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


def chart_specs(markdown: str) -> list[dict[str, Any]]:
    return [json.loads(html.unescape(m)) for m in re.findall(r'data-cv-chart="([^"]*)"', markdown)]


def test_every_rendered_chart_has_unique_labels_and_no_stacking(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(), make_dragonfly_run())
    specs = [s for name in report.SECTIONS for s in chart_specs(render(ds, name))]
    assert len(specs) >= 10
    for spec in specs:
        names = [t["name"] for t in spec["data"]]
        assert len(set(names)) == len(names), names
        assert spec["layout"].get("barmode", "group") == "group"
        assert not any("`" in n for n in names)


# ------------------------------------------------------------------ sections


def test_enqueue_labels_producers_and_keeps_single_and_bulk_apart(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    out = render(ds, "enqueue_section")
    bulk = chart_specs(out)[1]
    assert sorted(t["name"] for t in bulk["data"]) == ["1 producer", "4 producers"]
    assert len(chart_specs(out)) == 2


def test_one_job_per_call_labels_callers_and_batching_apart_from_variants(tmp_path: Path) -> None:
    doc = make_run()
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for callers, batching in ((1, True), (32, False), (32, True)):
        doc["results"].append({**copy.deepcopy(single), "params": {**single["params"], "callers": callers,
                                                                   "batching": batching}})
    doc["results"].append({**copy.deepcopy(single), "protocol": 2})
    out = render(dataset(tmp_path, doc), "enqueue_section")
    sweep, lone = chart_specs(out)[:2]
    assert {t["name"]: t["x"] for t in sweep["data"]} == {"batching off": [1, 32], "batching on": [1, 32]}
    assert [t["x"] for t in lone["data"]] == [["baseline", "RESP2"]]
    rows = [line.split("|")[1:4] for line in out.splitlines() if line.startswith(("| baseline", "| RESP2"))]
    labels = [tuple(cell.strip() for cell in row) for row in rows]
    assert len(set(labels)) == len(labels) == 5 + 2  # 4 single cases + RESP2, 2 bulk rows
    assert "callers 1" not in out and "batching False" not in out


def test_lone_enqueue_is_shown_against_the_pings_of_its_own_case_per_server(tmp_path: Path) -> None:
    doc = make_run()
    assert "enqueue ÷" not in render(dataset(tmp_path / "old", doc), "enqueue_section")  # not measured
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for server, batching in (("redis-7.0", False), ("valkey-9.1", True)):
        doc["results"].append({**copy.deepcopy(single), "server": server,
                               "params": {**single["params"], "batching": batching}})
    for row in [r for r in doc["results"] if r["scenario"] == "enqueue-single"]:
        rate = row["metrics"]["jobs_per_s"]["median"]
        row["metrics"] |= {"ping_client_ops_per_s": metric(5000, "1/s"),
                           "vs_ping_client": metric(rate / 5000, "ratio"),
                           "ping_held_ops_per_s": metric(8000, "1/s"),
                           "vs_ping_held": metric(rate / 8000, "ratio"),
                           "set_held_ops_per_s": metric(6800, "1/s"),
                           "set_held_vs_ping_held": metric(0.85, "ratio")}
    out = render(dataset(tmp_path / "new", doc), "enqueue_section")
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if "enqueue ÷ client.ping()" in line))
    ratios = lines[header + 2:header + 5]  # the ratios table, then the rates behind them
    assert [line.split("|")[1].strip() for line in ratios] == ["valkey-9.1", "valkey-9.1", "redis-7.0"]
    assert "| off " in ratios[0] and "| on " in ratios[1]
    assert "enqueue ÷ PING held" in lines[header]
    assert "0.600" in ratios[0] and "0.375" in ratios[0]  # 3,000 jobs/s over 5,000 and 8,000 PINGs/s
    assert "SET held ÷ PING held" in lines[header] and "0.850" in ratios[0]  # one plain write
    rates = next(line for line in lines if "client.ping() (calls/s)" in line)
    assert "PING, held (calls/s)" in rates and "enqueue (jobs/s)" in rates and "SET, held (calls/s)" in rates


def test_bulk_takeaway_compares_one_producer_with_one_producer(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    out = render(ds, "performance_takeaways")
    # single 3,000 jobs/s; bulk 30,000 with 1 producer and 42,000 with 4: like for like is 10x
    assert "gives 10.0x the jobs/s" in out and "14.0x" not in out


def test_bulk_takeaway_is_against_one_caller_without_batching_only(tmp_path: Path) -> None:
    doc = make_run()
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for callers, batching, k in ((1, True, 1.5), (8, False, 2.0), (8, True, 5.0)):  # not like for like
        params = {**single["params"], "callers": callers, "batching": batching}
        rates = {"jobs_per_s": metric(3000 * k, "1/s")}
        doc["results"].append({**single, "params": params, "metrics": rates})
    out = render(dataset(tmp_path, doc), "performance_takeaways")
    assert out.count("enqueueing in batches") == 1 and "gives 10.0x the jobs/s" in out


def test_concurrency_takeaway_reads_as_a_sentence(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run()), "performance_takeaways")
    assert "With 64 B payloads, 8 concurrent tasks complete" in out
    assert "gives 90% of the throughput of concurrency" not in out


def test_dragonfly_is_a_ratio_to_the_valkey_of_its_own_run(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(), make_dragonfly_run())
    out = render(ds, "dragonfly_section")
    assert "1.20x" in out and "0.30x" in out  # both lock modes side by side
    assert "--lock_on_hashtags" in out and "allow-undeclared-keys" in out
    assert "20261130T181041Z-df0001" in out and "20261129T201500Z-ab12cd" not in out
    assert "scenario `lifecycle`: not run on Dragonfly" in out
    home = render(ds, "headline")
    assert "Dragonfly" in home and "servers.md#dragonfly" in home


@pytest.mark.parametrize("speed", [0.4, 0.9])
def test_a_dragonfly_run_on_a_slower_host_is_flagged(tmp_path: Path, speed: float) -> None:
    """The committed Dragonfly run's Valkey reached about half the main run's EVALSHA rate, and
    nothing on the page said its ratios came from a starved host."""
    ds = dataset(tmp_path, make_run(), make_dragonfly_run(host_speed=speed))
    out, home = render(ds, "dragonfly_section"), render(ds, "headline")
    if speed < 0.6:
        assert "Measured on a slower or busier host" in out and "(0.40x)" in out
        assert "host was slower or busier (valkey-9.1 at 0.40x" in home
    else:
        assert "slower or busier" not in out + home


def test_a_server_measured_in_another_run_keeps_this_runs_reason(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(), make_dragonfly_run())
    out = render(ds, "servers_section")
    row = next(line for line in out.splitlines() if line.startswith("| dragonfly"))
    assert "not measured in this run[^dragonfly]" in row and "20261130T181041Z-df0001" in row
    assert "[^dragonfly]: no dragonfly binary (set DRAGONFLY_BIN)." in out


def test_home_says_when_the_peer_ratios_come_from_another_machine(tmp_path: Path) -> None:
    same = render(dataset(tmp_path / "same", make_run()), "headline")
    assert "peer ratios above from run" not in same
    table = make_run()
    del table["peers"]
    peers = make_run("20261128T090000Z-be0001", "2026-11-28T09:00:00Z")
    peers["environment"]["cpu_model"] = "Other CPU"
    home = render(dataset(tmp_path / "two", table, peers), "headline")
    assert ("come from run `20261129T201500Z-ab12cd` (synthetic, Test CPU, 2 cores); the peer ratios "
            "above from run `20261128T090000Z-be0001` (synthetic, Other CPU, 2 cores)") in home
    dragonfly = render(dataset(tmp_path / "df", make_run(), make_dragonfly_run()), "headline")
    assert "in its own run (`20261130T181041Z-df0001`, dragonfly-host, Test CPU, 2 cores)" in dragonfly


def test_main_figures_never_come_from_a_two_server_dragonfly_run(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(), make_dragonfly_run())
    assert "20261130T181041Z-df0001" not in render(ds, "process_section")


def test_a_verdict_that_flips_between_runs_is_not_a_recommendation(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # in the older run AOF always costs nothing
        if row["config"] == "aof-always":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] / 0.2, m["unit"])
    out = render(dataset(tmp_path, make_run(), older), "persistence_section")
    assert "**differs**" in out
    assert "appendfsync always costs" not in out.split("In every comparable run that measured it")[-1]


def test_an_aof_cost_held_in_every_run_is_stated_as_its_range_over_the_runs(tmp_path: Path) -> None:
    # AOF always costs 80% here and 60% in an older run: the verdict holds in both, the amount
    # does not; the page said "Measured in every comparable run: appendfsync always costs 80%"
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:
        if row["config"] == "aof-always":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] / 0.2 * 0.4, m["unit"])
    empty = make_run("20261129T180000Z-000002", "2026-11-29T18:00:00Z")  # measured no AOF at all
    empty["results"] = [r for r in empty["results"] if r["config"] == "default"]
    out = render(dataset(tmp_path, make_run(), older, empty), "persistence_section")
    advice = out.split("In every comparable run that measured it:**")[1].split("\n")[0]
    assert "appendfsync always costs 60%\u201380% over 2 runs (costs 80% in this one) in process" in advice
    assert "2 comparable runs measured AOF" in out


def with_repeated_memory(doc: dict[str, Any], saving_at_1024: bool = True) -> dict[str, Any]:
    """Memory rows with 3 repetitions (synthetic ones have 1: never beyond noise)."""
    for row in (r for r in doc["results"] if r["scenario"] == "memory" and "bytes_per_job" in r["metrics"]):
        value = row["metrics"]["bytes_per_job"]["median"]
        if not saving_at_1024 and row["config"] == "listpack-1024" and row["params"]["payload_bytes"] == 1024:
            value = 1500.0  # as much as the default limit: no saving in this run
        row["metrics"]["bytes_per_job"] = metric(value, "B", spread=0.001)
    return doc


def test_the_memory_recommendation_needs_every_comparable_run(tmp_path: Path) -> None:
    alone = render(dataset(tmp_path / "one", with_repeated_memory(make_run())), "memory_section")
    assert "1024 B (27% less)" in alone and "the only comparable one" in alone
    older = with_repeated_memory(make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z"), False)
    both = render(dataset(tmp_path / "two", with_repeated_memory(make_run()), older), "memory_section")
    assert "Recommendation" not in both
    assert ("uses less memory with the 1024 limit beyond noise in each of the 2 comparable runs that "
            "measured it") in both


def test_a_comparable_run_without_the_memory_comparison_does_not_veto_it(tmp_path: Path) -> None:
    # an older run of the same method that measured no listpack-1024 memory (a failover-only or
    # peers-only run) neither supports nor contradicts the saving: it read "no payload size uses
    # less memory ... in each of 2 comparable runs" while every run that measured it saved 27%
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    older["results"] = [r for r in older["results"] if r["scenario"] != "memory"]
    out = render(dataset(tmp_path, with_repeated_memory(make_run()), older), "memory_section")
    assert "**Recommendation:**" in out and "1024 B (27% less)" in out
    assert "the only comparable one that measured it" in out


def test_an_aof_gain_beyond_noise_is_read_as_drift_not_as_a_speed_up(tmp_path: Path) -> None:
    doc = make_run()
    for row in doc["results"]:
        if row["config"] == "aof-everysec":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] * 1.5 / 0.98, m["unit"])
    out = render(dataset(tmp_path, doc), "persistence_section")
    assert "gains" in out and "not a speed-up from AOF" in out
    assert "not a speed-up" not in render(dataset(tmp_path / "plain", make_run()), "persistence_section")


def test_pool_advice_says_within_the_noise_with_the_ratio_and_its_spread() -> None:
    rows = pd.DataFrame([{"concurrency": 32, "pool_size": p, "median": m, "min": m * 0.8, "max": m * 1.1,
                          "n": 3} for p, m in ((1, 500.0), (2, 1120.0), (32, 1000.0))])
    advice = connections.pool_advice(rows)
    assert "a pool of 2 is within the noise of a pool of 32: jobs/s ratio 1.12x" in advice
    assert "reaches" not in advice and "112%" not in advice


def test_methodology_names_the_baseline_and_how_many_runs_back_its_verdicts(tmp_path: Path) -> None:
    out = render(dataset(tmp_path / "one", make_run()), "runs_section")
    assert "**The baseline.**" in out and "`20261129T201500Z-ab12cd`" in out
    assert "3 repetitions after 1 warm-up" in out and "rests on this run alone" in out
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    out = render(dataset(tmp_path / "two", make_run(), older), "runs_section")
    assert "1 other full run of that method on that machine feeds the run-to-run checks" in out
    assert "measured on 2026-11-29 at commit" in out and "{" not in out.split("|")[0]


def test_the_lease_default_is_shown_next_to_the_maintenance_advice(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run()), "maintenance_section")
    assert f"`lease={QueueSettings().lease}`" in out


def test_exactly_once_accounting_is_shown_per_row(tmp_path: Path) -> None:
    doc = make_run()
    bad = next(r for r in doc["results"] if r["scenario"] == "process"
               and r["config"] == "default" and r["params"]["concurrency"] == 32)
    bad["exactly_once"] = {"enqueued": 12, "acked": 12, "duplicates": 0, "lost": 0, "ok": True}
    out = render(dataset(tmp_path, doc), "process_section")
    assert "| 12 \N{CHECK MARK}" in out and "| 10 \N{CHECK MARK}" in out
    case = pd.Series({"enqueued": 10, "acked": 9, "lost": 1, "duplicates": 0})
    assert common.exactly_once(case) == "9/10 acked, 1 lost, 0 dup."


def test_client_cpu_per_job_is_not_measured_yet_in_files_without_it(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run()), "client_cpu_section")
    assert "No results yet" in out and "client_cpu_us_per_job" in out
    assert "|" not in out  # no table, no figure typed in


def test_client_cpu_per_job_is_shown_beside_the_rate_of_the_same_case(tmp_path: Path) -> None:
    doc = make_run()
    cpu = {("enqueue-single", 1): 80.0, ("enqueue-bulk", 1): 8.0, ("enqueue-bulk", 4): 12.5,
           ("process", 32): 20.0}
    for row in doc["results"]:
        params = row["params"]
        key = (row["scenario"], params.get("producers", params.get("concurrency", 1)))
        if row["config"] == "default" and row["protocol"] == 3 and row["parser"] == "hiredis" \
                and key in cpu:
            row["metrics"]["client_cpu_us_per_job"] = metric(cpu[key], "us", spread=0.0)
    out = render(dataset(tmp_path, doc), "client_cpu_section")
    assert "No results yet" not in out
    lines = {line.split("|")[2].strip(): line for line in out.splitlines() if line.count("|") > 4}
    assert "| 80 " in lines["default"] and "12,500" in lines["default"]  # 1e6 / 80 µs; no params
    assert "| 12.5 " in lines["batch 50, producers 4"] and "80,000" in lines["batch 50, producers 4"]
    assert "| 20 " in lines["concurrency 32"] and "50,000" in lines["concurrency 32"]
    assert "concurrency 1 " not in out  # rows without the metric are not shown
    assert "20261129T201500Z-ab12cd" in out  # the source run is named


def test_the_rate_one_client_core_could_sustain_carries_the_spread_of_the_cpu_it_comes_from(
        tmp_path: Path) -> None:
    # 1e6 / (78.4, 80, 81.6 µs): it was shown as a bare 12,500, five digits from a figure known to ±2%
    doc = make_run()
    for row in doc["results"]:
        if row["scenario"] == "process" and row["config"] == "default" and row["protocol"] == 3 \
                and row["parser"] == "hiredis" and row["params"].get("concurrency") == 32:
            row["metrics"]["client_cpu_us_per_job"] = metric(80.0, "us")
    out = render(dataset(tmp_path, doc), "client_cpu_section")
    line = next(line for line in out.splitlines() if "concurrency 32" in line)
    assert "| 12,500 (12,300\u201312,800) " in line  # 3 digits


def test_the_call_ceiling_table_shows_each_figure_with_its_spread_and_the_ratio_with_whiskers(
        tmp_path: Path) -> None:
    # process c32 1,900 jobs/s (1,862-1,938) over EVALSHA at 32 callers 16,000 calls/s
    # (15,680-16,320): it showed bare medians and "0.12x" under "jobs per call ceiling"
    out = render(dataset(tmp_path, make_run()), "ceiling_section")
    line = next(line for line in out.splitlines() if line.startswith("| valkey-9.1"))
    assert "1,900 (1,862\u20131,938)" in line and "16,000 (15,680\u201316,320)" in line
    assert "0.12x (0.11\u20130.12)" in line and "jobs/s \u00f7 EVALSHA calls/s" in out


def test_calculator_defaults_are_the_library_defaults(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run()), "calculator")
    assert f'name="producer_pool" type="number" min="0" step="any" ' \
           f'value="{QueueSettings().pool_size}"' in out


def test_source_line_names_commit_and_quick_runs(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(quick=True))
    out = render(ds, "process_section")
    assert "quick run" in out and "`0123456`" in out


def test_every_section_renders_from_a_complete_file(tmp_path: Path) -> None:
    ds = dataset(tmp_path, copy.deepcopy(make_run()))
    pages = ("home", "performance", "workload", "servers", "tuning", "connections",
             "methodology")  # the pages of other scenarios (history, ha, ...) test themselves
    for page in pages:
        for name, section in import_module(f"bench.report.{page}").SECTIONS.items():
            # Dragonfly needs a Dragonfly run, client CPU a file recording it (tested below)
            if name not in ("dragonfly_section", "client_cpu_section"):
                assert "No results yet" not in section(ds, ""), name


def test_fields_added_by_the_harness_are_shown(tmp_path: Path) -> None:
    doc = make_run()
    doc["library_defaults"]["queue.pool_size"] = 4  # the default when this file was measured
    ds = dataset(tmp_path, doc)
    assert "synthetic worker, 32 no-op handlers at once" in render(ds, "headline")
    latency = render(ds, "latency_section")
    assert "| partly busy" in latency and "16 of the 32 handler slots" in latency
    assert latency.index("| unloaded") < latency.index("| partly busy")
    pool = render(ds, "pool_section")
    assert "8 callers" in pool and "32 callers" in pool
    assert f"`pool_size={QueueSettings().pool_size}` (4 when measured)" in pool
    assert 'value="20000"' in render(ds, "calculator")  # memory per connection, measured


def test_files_without_the_new_fields_still_render(tmp_path: Path) -> None:
    doc = make_run()
    del doc["library_defaults"]
    for key in ("process_per_case", "flush_per_case", "case_order", "complete"):
        del doc["method"][key]
    for row in doc["results"]:
        row.pop("headline", None)
    ds = dataset(tmp_path, doc)
    assert "a process per repetition" in render(ds, "environments_section")
    assert "no-op handlers at once" in render(ds, "headline")


def test_a_server_verdict_that_flips_between_runs_is_not_a_recommendation(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # in the older run redis-7.0 is far ahead in lifecycles
        if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
            rate = row["metrics"]["lifecycles_per_s"]
            row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 3, rate["unit"])
    ds = dataset(tmp_path, make_run(), older)
    out = render(ds, "servers_section")
    assert "disagree" in out and "not a recommendation" in out
    assert "From this run" not in out
    assert "The other comparable run agrees" in render(dataset(tmp_path / "one", make_run(),
        make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")), "servers_section")


def test_the_home_page_counts_disagreeing_runs_and_leaves_their_verdicts_to_servers(tmp_path: Path) -> None:
    runs = [make_run()]
    for n in range(1, 4):  # three older runs in which redis-7.0 is far ahead in lifecycles
        older = make_run(f"20261129T19000{n}Z-00000{n}", f"2026-11-29T19:00:0{n}Z")
        for row in older["results"]:
            if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
                rate = row["metrics"]["lifecycles_per_s"]
                row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 3, rate["unit"])
        runs.append(older)
    ds = dataset(tmp_path, *runs)
    home = next(line for line in render(ds, "headline").splitlines() if line.startswith("- **Servers**"))
    assert "disagree (3 of 3 runs" in home and "not a recommendation" in home
    assert "20261129T190001Z-000001" not in home  # each run's verdict is on the Servers page
    assert render(ds, "servers_section").count("20261129T19000") >= 3


def test_one_repetition_never_supports_a_verdict() -> None:
    one = pd.Series({"median": 200.0, "min": 200.0, "max": 200.0, "n": 1})
    other = pd.Series({"median": 100.0, "min": 100.0, "max": 100.0, "n": 1})
    assert compare.ratio(one, other)["noise"]


def test_methodology_says_what_each_older_run_is_used_for(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    other = make_run("20261129T180000Z-000002", "2026-11-29T18:00:00Z")
    other["method"]["repetitions"] = 5
    out = render(dataset(tmp_path, make_run(), older, other), "runs_section")
    assert "the figures on every page" in out
    assert "run-to-run spread only" in out and "History only: an older run" in out


def test_methodology_names_the_section_that_reads_a_run_apart_from_the_baseline(tmp_path: Path) -> None:
    main = make_run()
    del main["peers"]
    peers = make_run("20261129T210000Z-000003", "2026-11-29T21:00:00Z")
    peers["results"] = [r for r in peers["results"] if r["scenario"] == "reference"][:1]
    peers["results"][0]["server"] = "redis-7.0"  # fewer servers: never the baseline
    out = render(dataset(tmp_path, main, peers), "runs_section")
    assert "Peers, and its ratios on Home" in out
    assert "History only" not in out


def test_features_case_is_compared_apart_from_the_baseline_grid(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    features = render(ds, "features_section")
    assert "priorities+limit-key+hooks" in features and "0.79x" in features  # 1.5 / 1.9
    process = render(ds, "process_section")
    assert "priorities+limit-key+hooks" not in process  # not a second concurrency-32 row
    assert "features" not in ds.summary.columns and len(ds.featured) > 0
    without = make_run()
    without["results"] = [r for r in without["results"] if "features" not in r["params"]]
    assert "No results yet" in render(dataset(tmp_path / "old", without), "features_section")


def test_connections_over_several_queues_are_fitted_per_queue(tmp_path: Path) -> None:
    """The per-process formula over several queues comes from the `queues` rows: a pump and a
    maint per queue, one waiter (the synthetic counts), never typed into a page."""
    ds = dataset(tmp_path, make_run())
    expected = "pump 1 x queues + waiter 1 + maint 1 x queues"
    assert f"**{expected}**" in render(ds, "queues_formula")
    sizing = render(ds, "sizing_formula")
    assert f"**{expected}**" in sizing
    # each formula names the worker it was measured with: thread workers step no pump at 8
    assert "Serving several queues (`conveyor worker -q a,b,c`) with thread workers" in sizing
    assert "Measured per worker process, for one `AsyncWorker`" in sizing
    assert "Asyncio workers over several queues are not measured here" in sizing
    table = render(ds, "connections_queues")
    calc = render(ds, "calculator")
    spec = json.loads(html.unescape(calc.split('data-cv-calc="')[1].split('"')[0]))
    # an extra queue adds the AsyncWorker's own pump and maint (the roles rows), never the thread
    # workers' per-queue slope: the calculator mixed the two kinds of worker
    assert {r["role"] for r in spec["roles"]} >= {"pump", "maint"}
    assert spec["per_queue"] == ["pump", "maint"] and 'name="queues"' in calc
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 3")]
    assert [cell.strip() for cell in rows[0]] == ["3", "3", "1", "3", "3", "10"]


def test_a_verdict_names_each_comparison_point_apart() -> None:
    # point labels hold commas: listed plainly, two points read as four
    found = pd.DataFrame({"point": ["process, concurrency 32", "enqueue, one per call"], "ratio": [1.3, 1.2],
                          "noise": [False, False]})
    text = servers.recommendation({"valkey-8.1": found})
    assert "ahead in *process, concurrency 32* and *enqueue, one per call*" in text


def test_connection_roles_that_step_are_shown_as_measured_steps(tmp_path: Path) -> None:
    """An AsyncWorker's second pump (and maint) comes at concurrency 8: no line fits 1, 2, 2, so
    the formula and the calculator use the measured counts, never a fitted 1.55 + 0.0056 x c."""
    doc = make_run()
    roles = [r for r in doc["results"] if r["scenario"] == "connections" and r["params"]["kind"] == "roles"]
    low = copy.deepcopy(roles[0])
    low["params"]["concurrency"] = 1
    doc["results"].append(low)
    for row in roles:  # concurrency 8 and 32: two pumps and two maints
        for role in ("pump", "maint"):
            cell = row["metrics"][f"connections_{role}"]
            cell.update(median=2.0, values=[2.0], min=2.0, max=2.0)
    ds = dataset(tmp_path, doc)
    expected = "pump (1 at concurrency 1, 2 at concurrency 8 to 32) + waiter 1"
    assert expected in render(ds, "sizing_formula")
    calc = render(ds, "calculator")
    spec = json.loads(html.unescape(calc.split('data-cv-calc="')[1].split('"')[0]))
    by_role = {r["role"]: r for r in spec["roles"]}
    assert by_role["pump"] == {"role": "pump", "steps": [[1, 1.0], [8, 2.0], [32, 2.0]]}
    assert by_role["waiter"] == {"role": "waiter", "base": 1.0, "per_concurrency": 0.0}


def test_runs_with_the_same_pick_but_other_verdicts_beyond_noise_do_not_agree(tmp_path: Path) -> None:
    """Comparable runs agree only when every server's verdicts beyond noise do, not only the pick.
    Here the newer run has redis-7.0 behind in lifecycles, the older one level with valkey-9.1
    (the pick, valkey-9.1, unchanged): before, the page said 'The other comparable run agrees'."""
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # 0.8x of valkey-9.1 in the synthetic run: level in the older one
        if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
            rate = row["metrics"]["lifecycles_per_s"]
            row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 1.25, rate["unit"])
    out = render(dataset(tmp_path, make_run(), older), "servers_section")
    assert "agrees" not in out and "not a recommendation" in out


def test_bars_whose_medians_span_10x_get_a_log_axis() -> None:
    """Performance's ceilings (7k to 155k calls/s) and Tuning's memory by payload drew the small
    bars as slivers on a linear axis."""
    from bench.report.figures import plot  # noqa: PLC0415

    def bars(medians: list[float]) -> Any:
        rows = pd.DataFrame({"case": [f"c{i}" for i in range(len(medians))], "median": medians})
        return plot(rows, "case", None, str, title="t", x_title="x", y_title="y")

    assert bars([7_481.0, 155_130.0]).layout.yaxis.type == "log"
    assert bars([100.0, 900.0]).layout.yaxis.type != "log"


def test_a_ping_p99_of_few_samples_is_marked_as_the_slowest_sample(tmp_path: Path) -> None:
    """A batch of 1000 left 11 PINGs per sweep: their "p99" is the slowest, shown as a percentile."""
    doc = make_run()
    for r in doc["results"]:
        if r["scenario"] == "maintenance":
            r["extra"] = {"probe_samples": 11 if r["params"]["batch"] == 1000 else 250}
    out = render(dataset(tmp_path, doc), "maintenance_section")
    marked = [line for line in out.splitlines() if line.startswith("| 1000 ") and "†" in line]
    assert len(marked) == 1 and "| 1000 | 1000 | 11 |" in " ".join(marked[0].split())
    assert "† Fewer than 100 PING samples (as few as 11)" in out
    assert out.count("†") == 2  # the one cell and its note


def test_the_servers_page_defines_both_labels_its_table_uses() -> None:
    # the table marks "noise" (ranges overlap) and "within 10%" (ranges apart, under 10%); the page
    # defined noise as either, so a reader took "within 10%" for something else than noise's half
    page = (Path(__file__).resolve().parents[2] / "docs" / "servers.md").read_text()
    intro = " ".join(page.split("{{ servers_section() }}")[0].split())
    assert "*noise*: the repetitions' ranges overlap;" in intro
    assert "*within 10%*: the ranges are apart" in intro


def test_enqueue_parts_from_two_runs_each_name_their_own_run(tmp_path: Path) -> None:
    """A newer enqueue-single run (made alone, here on another machine) feeds the one-job-per-call
    part while enqueue-bulk still comes from the full run: the section named only the last part's
    run, so the newer run's figures were attributed to the older run and its machine."""
    older = make_run()
    newer = make_run(run_id="20261206T170300Z-cd34ef", created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "enqueue-single"]
    newer["environment"]["cpu_model"] = "AMD EPYC"
    out = render(dataset(tmp_path, older, newer), "enqueue_section")
    single, bulk = out.split("### In batches")
    assert "20261206T170300Z-cd34ef" in single and "AMD EPYC" in single
    # the ceilings note names ab12cd; the source line must not
    sources = [line for line in single.splitlines() if "Source: run" in line]
    assert sources and not any("ab12cd" in line for line in sources)
    assert "20261129T201500Z-ab12cd" in bulk and "cd34ef" not in bulk
    # one run behind both parts: one source line
    assert render(dataset(tmp_path / "one", older), "enqueue_section").count("Source: run") == 1


def test_client_cpu_rows_from_two_runs_say_which_run_each_came_from(tmp_path: Path) -> None:
    """One table held the enqueue rows of a newer enqueue-single run (another machine) and the
    process rows of the full run, with nothing telling which row came from which."""
    older = make_run()
    newer = make_run(run_id="20261206T170300Z-cd34ef", created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "enqueue-single"]
    for row in older["results"] + newer["results"]:
        if row["scenario"] in ("enqueue-single", "process"):
            row["metrics"]["client_cpu_us_per_job"] = metric(20.0, "us", spread=0.0)
    out = render(dataset(tmp_path, older, newer), "client_cpu_section")
    assert "compare rows of the same run only" in out
    rows = [line for line in out.splitlines() if line.startswith(("| `enqueue`", "| AsyncWorker"))]
    assert rows and all(("`cd34ef`" in r) == r.startswith("| `enqueue`") for r in rows)
    assert all("`ab12cd`" in r for r in rows if not r.startswith("| `enqueue`"))
    one = render(dataset(tmp_path / "one", older), "client_cpu_section")
    assert "| run " not in one  # one run: no column
