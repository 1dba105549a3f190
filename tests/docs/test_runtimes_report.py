"""The Runtimes and drivers page: ratios to the baseline, "not measured yet", the recommendation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from docs_synthetic import make_run
from test_docs_report import dataset, render

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


def ratio_line(table: str, scenario: str) -> str:
    return next(li for li in table.splitlines() if li.startswith(f"| {scenario} "))


def test_only_the_baseline_run_leaves_other_options_not_measured(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run())
    table = render(ds, "runtimes_table")
    assert "measured on valkey-9.1" in next(li for li in table.splitlines() if "(baseline)" in li)
    for option in ("3.12 ·", "3.13 ·", "uvloop", "valkey-glide"):
        line = next(li for li in table.splitlines() if option in li)
        assert "not measured yet: command" in line, line
    # the pure-Python parser variant is in the baseline run itself: measured, like for like
    pure = next(li for li in table.splitlines() if "pure-Python parser" in li and "measured" in li)
    # process only: the status names the scenarios still missing (shown as — in the ratios)
    assert "not measured yet: reference, enqueue-single, enqueue-bulk, latency (— below)" in pure
    assert "0.60x" in ratio_line(table, "process") and "—" in ratio_line(table, "reference")
    assert "No chart yet" not in render(ds, "runtimes_chart")
    assert "Keep the default" in render(ds, "runtimes_recommendation")


def test_a_faster_interpreter_is_a_ratio_and_the_recommendation(tmp_path: Path) -> None:
    ds = dataset(tmp_path, make_run(),
                 variant_run("20261129T211500Z-ab12ce", "2026-11-29T21:15:00Z", 1.3, "3.12.1"),
                 variant_run("20261129T221500Z-ab12cf", "2026-11-29T22:15:00Z", 1.05, loop="uvloop"))
    found = runtimes.ratios(ds)
    py312 = next(o for o in found if o.python == "3.12")
    assert {round(v, 6) for v in found[py312]["ratios"].values()} == {1.3}
    assert set(found[py312]["ratios"]) == set(runtimes.SCENARIOS)
    table = render(ds, "runtimes_table")
    header = next(li for li in table.splitlines() if li.startswith("| scenario"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    for scenario in runtimes.SCENARIOS:
        cells = [c.strip() for c in ratio_line(table, scenario).strip("|").split("|")]
        by_option = dict(zip(columns, cells, strict=True))
        assert by_option["3.12 · asyncio · redis-py + hiredis"] == "1.30x"
        assert by_option["3.11 · uvloop · redis-py + hiredis"] == "1.05x (noise)"
    advice = render(ds, "runtimes_recommendation")
    assert "CPython 3.12 · asyncio · redis-py + hiredis" in advice and "1.30x" in advice
    assert "data-cv-chart" in render(ds, "runtimes_chart")


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
    assert "--driver glide" in render(ds, "runtimes_commands")
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
    assert "1.20x (noise)" in ratio_line(table, "reference")


def test_a_driver_run_never_becomes_the_run_other_pages_show(tmp_path: Path) -> None:
    glide = variant_run("20261130T211500Z-ab12cf", "2026-11-30T21:15:00Z", 0.9, driver="glide")
    glide["method"]["driver"] = "glide"
    glide["method"]["quick"] = False
    ds = dataset(tmp_path, make_run(), glide)
    assert common.primary_run(ds, "process") == make_run()["run_id"]  # newer, yet a variant run
    assert "valkey-glide" in render(ds, "runtimes_table")
