"""The Runtimes and drivers page: ratios to the baseline, "not measured yet", the recommendation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from docs_synthetic import load_docs as dataset
from docs_synthetic import make_run, render

from bench.report import common, runtimes


def variant_run(run_id: str, created: str, factor: float, python: str = "3.11.7",
                **params: Any) -> dict[str, Any]:
    """make_run() on another interpreter (or with extra case params), every value times factor
    (latency divided: faster everywhere)."""
    doc = copy.deepcopy(make_run(run_id=run_id, created=created))
    doc["environment"]["python"] = python
    for row in doc["results"]:
        row["params"].update(params)
        for name, m in row["metrics"].items():
            scale = 1 / factor if name.endswith("_ms") else factor
            m["values"] = [v * scale for v in m["values"]]
            for key in ("median", "mean", "min", "max", "p5", "p95"):
                if isinstance(m.get(key), int | float):
                    m[key] *= scale
    return doc


def ratio_cell(table: str, option: str, scenario: str) -> str:
    """The cell of ``option`` (its row label) and ``scenario`` in the first server's ratio table."""
    lines = table.splitlines()
    at = next(i for i, li in enumerate(lines) if li.startswith("| vs baseline"))
    columns = [c.strip() for c in lines[at].strip("|").split("|")]
    line = next(li for li in lines[at:] if li.startswith(f"| {option} "))
    return dict(zip(columns, [c.strip() for c in line.strip("|").split("|")], strict=True))[scenario]


def test_only_the_baseline_run_leaves_other_options_not_measured(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    table = render(ds, "runtimes_table")
    baseline = next(li for li in table.splitlines() if "(baseline)" in li)
    assert "| valkey-9.1 " in baseline and "| ab12cd " in baseline and "| measured " in baseline
    for option in ("3.12 ·", "3.13 ·", "uvloop", "valkey-glide"):
        line = next(li for li in table.splitlines() if option in li)
        assert "not measured yet: command" in line, line
    # the pure-Python parser variant is in the baseline run itself: measured, like for like
    pure = next(li for li in table.splitlines() if "pure-Python parser" in li and "| valkey-9.1 " in li)
    assert "| ab12cd " in pure and " vs " not in pure  # one run: nothing apart
    # process only: the status names the scenarios still missing (shown as — in the ratios)
    assert "not measured yet: reference, enqueue-single, enqueue-bulk, latency (— below)" in pure
    pure = "redis-py, pure-Python parser"
    assert ratio_cell(table, pure, "process") == "0.60x" and ratio_cell(table, pure, "reference") == "—"
    assert "No chart yet" not in render(ds, "runtimes_chart")
    assert "Keep the default" in render(ds, "runtimes_recommendation")


def test_a_faster_interpreter_is_a_ratio_and_the_recommendation(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(),
                 variant_run("20261129T211500Z-ab12ce", "2026-11-29T21:15:00Z", 1.3, "3.12.1"),
                 variant_run("20261129T221500Z-ab12cf", "2026-11-29T22:15:00Z", 1.05, loop="uvloop"))
    found = runtimes.ratios(ds)
    py312 = next(o for o in found if o.python == "3.12")
    assert {round(v, 6) for v in found[py312]["valkey-9.1"]["ratios"].values()} == {1.3}
    assert set(found[py312]["valkey-9.1"]["ratios"]) == set(runtimes.SCENARIOS)
    table = render(ds, "runtimes_table")
    for scenario in runtimes.SCENARIOS:
        assert ratio_cell(table, "CPython 3.12", scenario) == "1.30x"
        assert ratio_cell(table, "uvloop", scenario) == "1.05x (noise)"
    advice = render(ds, "runtimes_recommendation")
    assert "CPython 3.12 · asyncio · redis-py + hiredis" in advice and "1.30x" in advice
    assert "data-cv-chart" in render(ds, "runtimes_chart")


def _scale_latency(doc: dict[str, Any], factor: float) -> None:
    for row in doc["results"]:
        if row["scenario"] == "latency":
            for m in row["metrics"].values():
                m["values"] = [v * factor for v in m["values"]]
                for key in ("median", "mean", "min", "max", "p5", "p95", "mad"):
                    if isinstance(m.get(key), int | float):
                        m[key] *= factor


def test_a_scenario_the_baseline_itself_drifts_in_is_left_out_of_the_recommendation(
        tmp_path: Path) -> None:
    # The baseline measured twice differs 3x in latency: the latency ratios of other runs say
    # nothing, and a 0.30x there must not pull down an option 1.30x faster everywhere else.
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.0)
    _scale_latency(again, 3.0)
    py312 = variant_run("20261129T233000Z-4e7312", "2026-11-29T23:30:00Z", 1.3, "3.12.1")
    _scale_latency(py312, 3.0 * 1.3 / 0.3)
    ds = dataset(tmp_path, make_run(), again, py312)
    assert ratio_cell(render(ds, "runtimes_table"), "CPython 3.12", "latency") == "0.30x"
    advice = render(ds, "runtimes_recommendation")
    assert "**CPython 3.12 · asyncio · redis-py + hiredis** is the fastest measured option: 1.30x" in advice
    assert ("; left out, where the baseline measured twice differs beyond noise: latency on valkey-9.1 "
            "(0.33x)") in advice


def test_options_measured_only_where_the_baseline_drifts_get_no_recommendation_and_say_why(
        tmp_path: Path) -> None:
    # The baseline measured twice differs 1.5x in every scenario: 3.12's ratios cannot be told
    # from the machine's drift. The page must not claim that nothing but the baseline was measured.
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.5)
    py312 = variant_run("20261129T233000Z-4e7312", "2026-11-29T23:30:00Z", 1.3, "3.12.1")
    runs = [make_run(), again, py312]
    for doc in runs:  # without the pure-Python parser cases: those pair within their run
        doc["results"] = [r for r in doc["results"] if r["parser"] != "python"]
    advice = render(dataset(tmp_path, *runs), "runtimes_recommendation")
    assert "no runtime, loop or driver other than the baseline has been measured" not in advice
    assert advice.startswith("**No recommendation from these runs:**"), advice
    assert "the baseline measured twice differs beyond noise in more than half of the scenarios" in advice
    assert "process on valkey-9.1 (1.50x)" in advice


def test_a_faster_raw_client_alone_is_not_the_recommendation(tmp_path: Path) -> None:
    # A driver whose raw client is 2x faster (reference) but whose queue is 0.85x is not advised.
    fast_raw = variant_run("20261129T211500Z-ab12ce", "2026-11-29T21:15:00Z", 0.85, driver="glide")
    for row in fast_raw["results"]:
        if row["scenario"] == "reference":
            for m in row["metrics"].values():
                m["values"] = [v * 2 / 0.85 for v in m["values"]]
                for key in ("median", "mean", "min", "max", "p5", "p95"):
                    if isinstance(m.get(key), int | float):
                        m[key] *= 2 / 0.85
    ds = dataset(tmp_path, make_run(), fast_raw)
    advice = render(ds, "runtimes_recommendation")
    assert "Keep the default" in advice and "reference" not in advice


def test_no_results_renders_without_error(tmp_path: Path) -> None:
    ds = dataset(tmp_path)
    table = render(ds, "runtimes_table")
    assert table.count("not measured yet") == len(runtimes.OPTIONS) and "No option besides" in table
    assert "No recommendation yet" in render(ds, "runtimes_recommendation")
    assert "--beside uvloop,glide" in render(ds, "runtimes_commands")
    sizes = render(ds, "runtimes_trade_offs")
    assert sizes.count("not measured yet") == len(runtimes.TRADE_OFFS)


def test_install_sizes_come_from_the_bench_run_that_recorded_them(tmp_path: Path) -> None:
    doc = make_run()
    doc["method"]["client_install_bytes"] = {"redis": 2_000_000, "hiredis": 500_000,
                                             "valkey-glide": 30_000_000, "valkey-glide-sync": 20_000_000}
    sizes = render(dataset(tmp_path, doc), "runtimes_trade_offs")
    assert "| 2.5 MB" in sizes and "| 50.0 MB" in sizes and "not measured" not in sizes


def test_a_difference_inside_the_repetitions_spread_is_noise(tmp_path: Path) -> None:
    wide = variant_run("20261129T211500Z-ab12ce", "2026-11-29T21:15:00Z", 1.2, "3.13.0")
    for row in wide["results"]:
        for m in row["metrics"].values():
            m["values"] = [v * f for v, f in zip(m["values"], (0.5, 1.0, 1.5), strict=False)]
    table = render(dataset(tmp_path, make_run(), wide), "runtimes_table")
    assert ratio_cell(table, "CPython 3.13", "reference") == "1.20x (noise)"


def test_a_driver_run_never_becomes_the_run_other_pages_show(tmp_path: Path) -> None:
    glide = variant_run("20261130T211500Z-ab12cf", "2026-11-30T21:15:00Z", 0.9, driver="glide")
    glide["method"]["driver"] = "glide"
    glide["method"]["quick"] = False
    ds = dataset(tmp_path, make_run(), glide)
    assert common.primary_run(ds, "process") == make_run()["run_id"]  # newer, yet a variant run
    assert "valkey-glide" in render(ds, "runtimes_table")


def option_rows(table: str, option: str) -> list[str]:
    return [li for li in table.splitlines() if li.startswith(f"| {option} ")]


def test_an_option_pairs_its_newest_run_with_the_nearest_baseline_run(tmp_path: Path) -> None:
    # Baseline runs at 20:15 and 23:15; a 3.12 run at 21:00 (older params era: other case keys)
    # and its newest run at 22:45, nearer the second baseline (which is 1.5x faster).
    late_base = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.5)
    old = variant_run("20261129T210000Z-01d312", "2026-11-29T21:00:00Z", 0.5, "3.12.1", era=1)
    new = variant_run("20261129T224500Z-4e7312", "2026-11-29T22:45:00Z", 1.8, "3.12.1")
    ds = dataset(tmp_path, make_run(), late_base, old, new)
    py312 = next(o for o in runtimes.OPTIONS if o.python == "3.12")
    got = runtimes.ratios(ds)[py312]["valkey-9.1"]
    # 1.8 / 1.5 against the nearer baseline; the older 3.12 run (0.5x) is left out
    assert {round(v, 6) for v in got["ratios"].values()} == {1.2}
    assert got["run"] == new["run_id"] and got["base"] == [late_base["run_id"]]
    table = render(ds, "runtimes_table")
    assert any("| 4e7312 vs ba5e02 (30 min apart) " in li for li in option_rows(table, "3.12 ·"))


def on_two_servers(doc: dict[str, Any]) -> dict[str, Any]:
    """The run's Valkey 9.1 rows of the compared scenarios measured on Redis 7.0 too."""
    doc["results"] += [copy.deepcopy(r) | {"server": "redis-8.2"} for r in doc["results"]
                       if r["server"] == "valkey-9.1" and r["scenario"] in runtimes.SCENARIOS]
    return doc


def test_every_server_an_option_ran_on_has_its_own_ratios(tmp_path: Path) -> None:
    ds = dataset(tmp_path, on_two_servers(make_run()), on_two_servers(
        variant_run("20261129T211500Z-ab12ce", "2026-11-29T21:15:00Z", 1.3, "3.12.1")))
    py312 = next(o for o in runtimes.OPTIONS if o.python == "3.12")
    found = runtimes.ratios(ds)[py312]
    assert list(found) == ["valkey-9.1", "redis-8.2"]  # display order
    table = render(ds, "runtimes_table")
    for server in found:
        assert any(f"| {server} " in li for li in option_rows(table, "3.12 ·"))
        assert f"**{server}**" in table
    charts = render(ds, "runtimes_chart")
    assert "runtimes-ratios-valkey-9.1" in charts and "runtimes-ratios-redis-8.2" in charts
    assert "on valkey-9.1, redis-8.2" in render(ds, "runtimes_recommendation")


def test_an_option_no_further_from_1_than_the_baselines_own_drift_is_noise(tmp_path: Path) -> None:
    # The baseline measured again 1.3x faster; a 3.12 run 1.25x the nearer (first) baseline is
    # beyond ±10% and beyond its spread, yet inside the run-to-run drift: noise.
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.3)
    py312 = variant_run("20261129T203000Z-4e7312", "2026-11-29T20:30:00Z", 1.25, "3.12.1")
    table = render(dataset(tmp_path, make_run(), again, py312), "runtimes_table")
    assert ratio_cell(table, runtimes.AGAIN, "process") == "1.30x"
    assert ratio_cell(table, "CPython 3.12", "process") == "1.25x (noise)"
    base_rows = option_rows(table, "3.11 · asyncio · redis-py + hiredis")
    assert any("| ba5e02 vs ab12cd (180 min apart) " in li for li in base_rows)


def test_a_newer_run_of_one_scenario_never_replaces_the_full_baseline_run(tmp_path: Path) -> None:
    # `--scenarios enqueue-single` after the full measurement (a user checking one number): the
    # page keeps the full runs and their drift instead of showing the baseline "not measured".
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.3)
    partial = variant_run("20261130T091500Z-0e5c01", "2026-11-30T09:15:00Z", 2.0)
    partial["results"] = [r for r in partial["results"] if r["scenario"] == "enqueue-single"]
    table = render(dataset(tmp_path, make_run(), again, partial), "runtimes_table")
    base_rows = option_rows(table, "3.11 · asyncio · redis-py + hiredis")
    assert any("| ba5e02 vs ab12cd (180 min apart) | measured " in li for li in base_rows), base_rows
    assert ratio_cell(table, runtimes.AGAIN, "process") == "1.30x"
    assert "0e5c01" not in table


def test_the_chart_shows_the_baselines_drift_and_whiskers_each_ratio(tmp_path: Path) -> None:
    """The chart drew bare bars: no whiskers, and not the drift an option must exceed."""
    import html  # noqa: PLC0415
    import json  # noqa: PLC0415

    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.3)
    py312 = variant_run("20261129T203000Z-4e7312", "2026-11-29T20:30:00Z", 1.25, "3.12.1")
    out = render(dataset(tmp_path, make_run(), again, py312), "runtimes_chart")
    fig = json.loads(html.unescape(out.split('data-cv-chart="')[1].split('"')[0]))
    traces = {t["name"]: t for t in fig["data"]}
    assert runtimes.AGAIN in traces  # the noise floor, beside the options
    bars = traces[runtimes.AGAIN]["error_y"]
    assert bars["symmetric"] is False and min(bars["array"]) > 0 and min(bars["arrayminus"]) > 0


def with_twins(doc: dict[str, Any], factor: float, **params: Any) -> dict[str, Any]:
    """The run with a twin of each of its rows on ``params`` (bench --beside), ``factor`` faster."""
    twin = variant_run(doc["run_id"], doc["created_utc"], factor, **params)
    doc["results"] += [r for r in twin["results"]  # the primary variant's cases only, as bench does
                       if r["scenario"] in runtimes.SCENARIOS and r["parser"] == "hiredis"]
    return doc


def test_twins_measured_beside_the_baseline_in_one_run_ignore_the_drift_between_runs(
        tmp_path: Path) -> None:
    # The baseline measured again 1.5x faster in every scenario: a 3.12 run of its own is drift,
    # but uvloop, measured case by case beside the baseline in that run, is a like-for-like 1.30x.
    first = with_twins(make_run(), 1.3, loop="uvloop")
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.5)
    py312 = variant_run("20261129T211500Z-4e7312", "2026-11-29T21:15:00Z", 1.3, "3.12.1")
    ds = dataset(tmp_path, first, again, py312)
    table = render(ds, "runtimes_table")
    assert ratio_cell(table, "uvloop", "process") == "1.30x"  # not marked noise by the 1.5x drift
    assert ratio_cell(table, "CPython 3.12", "process") == "1.30x (noise)"  # inside the drift
    [uv_row] = [li for li in option_rows(table, "3.11 · uvloop ·")]
    assert f"| {first['run_id'][-6:]} " in uv_row and " vs " not in uv_row  # one run: nothing apart
    advice = render(ds, "runtimes_recommendation")
    assert advice.startswith("**CPython 3.11 · uvloop · redis-py + hiredis** is the fastest option "
                             "judged here: 1.30x"), advice  # 3.12 is measured but not judged
    assert "left out" not in advice  # its scenarios were measured beside the baseline


def test_a_run_with_twins_never_becomes_the_run_other_pages_show(tmp_path: Path) -> None:
    # Its rows hold uvloop and glide twins beside each case: the Performance page's tables would
    # show them as more rows of the same case.
    twins = with_twins(variant_run("20261130T211500Z-ab12cf", "2026-11-30T21:15:00Z", 1.0), 1.2,
                       driver="glide")
    twins["method"]["beside"] = ["glide"]
    twins["method"]["quick"] = False
    ds = dataset(tmp_path, make_run(), twins)
    assert common.primary_run(ds, "process") == make_run()["run_id"]
    assert ratio_cell(render(ds, "runtimes_table"), "valkey-glide", "process") == "1.20x"


def test_the_drift_covers_every_baseline_run_an_option_is_paired_with(tmp_path: Path) -> None:
    # Baseline runs at 20:15 (slow), 23:15 and 23:45 (both 1.5x faster). A 3.13 run at 20:30 pairs
    # with the slow one and reads 1.5x: the two newest baselines agree, but the slow run 3.13 is
    # paired with differs 1.5x from them, so 3.13's 1.5x is drift, not the interpreter.
    runs = [make_run(),
            variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.5),
            variant_run("20261129T234500Z-ba5e03", "2026-11-29T23:45:00Z", 1.5),
            variant_run("20261129T203000Z-4e7313", "2026-11-29T20:30:00Z", 1.5, "3.13.0")]
    for doc in runs:  # without the pure-Python parser cases: those pair within their run
        doc["results"] = [r for r in doc["results"] if r["parser"] != "python"]
    ds = dataset(tmp_path, *runs)
    table = render(ds, "runtimes_table")
    assert ratio_cell(table, "CPython 3.13", "process") == "1.50x (noise)"
    assert ratio_cell(table, "baseline again (drift)", "process") == "1.50x"
    [base_row] = option_rows(table, "3.11 · asyncio · redis-py + hiredis (baseline)")
    assert "ba5e03 vs ab12cd, ba5e02" in base_row
    advice = render(ds, "runtimes_recommendation")
    assert advice.startswith("**No recommendation from these runs:**") and "fastest" not in advice
    # beside a twin measured in the baseline's run, 3.13 is named as not judged
    ds = dataset(tmp_path / "twins", with_twins(runs[0], 1.2, loop="uvloop"), *runs[1:])
    advice = render(ds, "runtimes_recommendation")
    assert advice.startswith("**CPython 3.11 · uvloop · redis-py + hiredis** is the fastest"), advice
    assert "Not judged: CPython 3.13 · asyncio · redis-py + hiredis, measured in runs of their own" in advice


def test_an_option_judged_on_fewer_than_half_its_cells_is_not_recommended(tmp_path: Path) -> None:
    # The baseline measured twice drifts 3x in every scenario but process: a 3.13 run of its own
    # 1.3x faster everywhere is judged on process alone, one cell of four, and is not advised.
    again = variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.0)
    for row in again["results"]:
        if row["scenario"] not in ("process", "reference"):
            for m in row["metrics"].values():
                m["values"] = [v * 3 for v in m["values"]]
                for key in ("median", "mean", "min", "max", "p5", "p95", "mad"):
                    if isinstance(m.get(key), int | float):
                        m[key] *= 3
    py313 = variant_run("20261129T233000Z-4e7313", "2026-11-29T23:30:00Z", 1.3, "3.13.0")
    runs = [make_run(), again, py313]
    for doc in runs:  # without the pure-Python parser cases: those pair within their run
        doc["results"] = [r for r in doc["results"] if r["parser"] != "python"]
    advice = render(dataset(tmp_path, *runs), "runtimes_recommendation")
    assert "fastest" not in advice and advice.startswith("**No recommendation from these runs:**"), advice


def test_options_left_unjudged_are_not_counted_among_those_the_advice_compares(tmp_path: Path) -> None:
    # 3.13 reads 1.5x in a run of its own, inside the baseline's drift: not judged. uvloop, a twin
    # beside the baseline, is the only judged option; the advice said "the fastest measured option"
    # and "No measured option beats the baseline", which 3.13's 1.5x (measured) contradicts
    runs = [make_run(),
            variant_run("20261129T231500Z-ba5e02", "2026-11-29T23:15:00Z", 1.5),
            variant_run("20261129T203000Z-4e7313", "2026-11-29T20:30:00Z", 1.5, "3.13.0")]
    for doc in runs:  # without the pure-Python parser cases: those pair within their run
        doc["results"] = [r for r in doc["results"] if r["parser"] != "python"]
    for factor, start in ((1.2, "is the fastest option judged here: 1.20x"),
                          (1.0, "No option judged here beats the baseline")):
        first = with_twins(copy.deepcopy(runs[0]), factor, loop="uvloop")
        advice = render(dataset(tmp_path / str(factor), first, *runs[1:]), "runtimes_recommendation")
        assert start in advice and "measured option" not in advice, advice
        assert "Not judged: CPython 3.13" in advice


def test_the_page_does_not_claim_runtimes_move_throughput_more_than_server_tuning() -> None:
    # no result compares the two: the options here are mostly within noise, AOF always costs 44-66%
    page = (Path(__file__).resolve().parents[2] / "docs" / "runtimes.md").read_text()
    assert "more\nthan most server tuning" not in page and "more than most server tuning" not in page


def test_the_pure_parser_run_is_reproduced_with_the_parser_it_measures(tmp_path: Path) -> None:
    # Its command read `--parsers hiredis ... --driver redis-py-pure`: the run measures the pure-Python
    # parser whatever --parsers says, but the command named hiredis (and needed it installed).
    commands = render(dataset(tmp_path), "runtimes_commands").splitlines()
    pure = next(line for line in commands if "--driver redis-py-pure" in line)
    assert "--parsers python" in pure and "hiredis" not in pure
    assert all("--parsers hiredis" in line for line in commands if line.startswith("nox") and line != pure)


def test_baseline_runs_of_two_hosts_with_one_label_are_never_paired(tmp_path: Path) -> None:
    """Runs carry the machine label 'vm' on every host: a newer full run on an AMD host was read
    against the Intel baseline runs as the baseline's own drift (1.96x on latency), which then
    called every option's ratio noise; an option on the Intel host was paired across too."""
    intel = make_run()  # 'Test CPU'
    amd = variant_run("20261130T101500Z-ab12d0", "2026-11-30T10:15:00Z", 2.0)
    amd["environment"]["cpu_model"] = "AMD EPYC"
    # nearer in time to the AMD baseline run than to the Intel one it must be paired with
    option = variant_run("20261130T100000Z-ab12ce", "2026-11-30T10:00:00Z", 1.3, "3.12.1")
    ds = dataset(tmp_path, intel, option, amd)
    assert "valkey-9.1" not in runtimes.drift(ds)  # one baseline run per host: no drift to read
    py312 = next(o for o in runtimes.ratios(ds) if o.python == "3.12")
    paired = runtimes.ratios(ds)[py312]["valkey-9.1"]
    assert paired["base"] == [intel["run_id"]]
    assert {round(v, 6) for v in paired["ratios"].values()} == {1.3}


def test_baseline_runs_of_two_commits_are_not_the_baselines_drift(tmp_path: Path) -> None:
    """The newest full run was read against a baseline run made four days and many commits
    earlier as the baseline's run-to-run drift (2.98x on latency): a code change, not drift."""
    older = make_run()
    newer = variant_run("20261130T101500Z-ab12d0", "2026-11-30T10:15:00Z", 2.0)
    newer["git"]["commit"] = "f" * 40
    assert "valkey-9.1" not in runtimes.drift(dataset(tmp_path / "two", older, newer))
    again = variant_run("20261130T103000Z-ab12d1", "2026-11-30T10:30:00Z", 2.2)
    again["git"]["commit"] = "f" * 40
    found = runtimes.drift(dataset(tmp_path / "three", older, newer, again))["valkey-9.1"]
    assert found["run"] == again["run_id"] and found["base"] == [newer["run_id"]]
    assert round(found["ratios"]["process"], 6) == 1.1
    for doc in (newer, again):
        doc["git"]["commit"] = None  # not recorded: no two runs are known to share their code
    assert "valkey-9.1" not in runtimes.drift(dataset(tmp_path / "unknown", older, newer, again))
