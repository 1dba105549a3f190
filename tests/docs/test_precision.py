"""How many digits the site writes: no more than the spread of a figure supports.

Rates known to ±10-20% were written to the unit (``276,345 (229,780-324,656)``) and ratios to two
decimals however large (``132.56x``); repetitions that all measured the same figure showed a bare
median, which read as a spread left out.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from docs_synthetic import make_run, metric

from bench import report
from bench.report import text

DASH = "\N{EN DASH}"


def _render(tmp_path: Path, doc: dict[str, Any], section: str) -> str:
    """``section`` of the site built from ``doc`` alone, on one line."""
    path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return " ".join(report.SECTIONS[section](report.load(tmp_path), "").split())


def test_a_rate_with_a_wide_range_is_written_to_three_significant_digits() -> None:
    # the Tuning page's promoted jobs/s: 276,345 (229,780-324,656), a spread of -17%/+17%
    assert text.fmt_stat(276_345.2, 20_000.0, 3, 229_780.4, 324_656.1) == f"276,000 (230,000{DASH}325,000)"
    assert text.fmt_stat(6853.6, 50.4, n=7) == "6,850 ± 50"  # the MAD at the median's precision
    assert text.fmt(101_191.3) == "101,000" and text.fmt(80_124.2) == "80,100"


@pytest.mark.parametrize(("value", "shown"), [
    (12_346.0, "12,346"),  # a whole count stays whole and exact
    (123.4, "123"), (12.34, "12.3"), (0.01234, "0.0123"), (1.5, "1.50"),  # small values as before
    (99.96, "100"), (999.6, "1,000"),  # rounding up to the next power of ten adds no digit
])
def test_counts_stay_exact_and_small_values_keep_three_digits(value: float, shown: str) -> None:
    assert text.fmt(value) == shown


def test_whole_counts_with_a_range_are_not_rounded() -> None:
    assert text.fmt_stat(1234.0, 0.0, 3, 1200.0, 1300.0) == f"1,234 (1,200{DASH}1,300)"


@pytest.mark.parametrize(("ratio", "shown"), [
    (132.56, "133x"), (15.0, "15.0x"), (1.134, "1.13x"), (0.756, "0.76x"), (9.996, "10.0x"),
    (1234.5, "1,230x"),
])
def test_ratios_have_two_decimals_below_10_and_three_significant_digits_above(ratio: float,
                                                                               shown: str) -> None:
    assert text.times(ratio) == shown


def test_a_ratio_range_follows_the_ratio_rule() -> None:
    assert text.span(98.12, 180.33) == f"98.1{DASH}180"
    assert text.span(0.981, 1.104) == f"0.98{DASH}1.10"


def test_repetitions_that_all_measured_the_same_say_so() -> None:
    # redis-8.2 dramatiq memory per waiting job: three slopes of 435.9764 B; shown as a bare "436"
    # beside "205 (205-205)" cells, it read as a spread not shown
    assert text.fmt_stat(435.9764, 0.0, 3, 435.9764, 435.9764) == "436 (all 3 equal)"
    assert text.fmt_stat(100.0, 0.0, 3, 100.0, 100.0) == "100"  # a count, the same every time
    assert text.fmt_stat(435.9764, 0.0, 1) == "436"  # one repetition: no spread to show


def test_a_range_that_rounds_to_the_median_is_written_as_a_share() -> None:
    # rq on valkey-9.1: 1,157.69 to 1,158.02 B; "1,160 (1,160-1,160)" says nothing
    assert text.fmt_stat(1157.9868, 0.03, 3, 1157.686, 1158.0168) == "1,160 (range 0.03%)"


def test_the_goal_notes_write_ratios_and_derived_rates_to_three_digits(tmp_path: Path) -> None:
    # the Peers goal note read "Reaching 15.00x would take 101,191 jobs/s ... bounds it near 80,124"
    doc = copy.deepcopy(make_run())
    for row in doc["peers"]["rows"]:
        if row["scenario"] == "process" and row["params"]["concurrency"] == 32:
            conveyor = row["library"] == "conveyor"
            if not conveyor:
                row["metrics"]["jobs_per_s"] = metric(1619.68, "1/s")
            for name, value in (("commands", 2), ("reads", 0.5), ("server_cpu_us", 20.0),
                                ("client_cpu_us", 30.7 if conveyor else 300.0)):
                row["metrics"][f"per_job_{name}"] = metric(value, "per job")
    goals = _render(tmp_path, doc, "peers_goals")
    # 15 x 1,619.68 = 24,295.2 jobs/s; 2 cores x 1e6 / (30.7 + 20 µs) = 39,447.7 jobs/s
    assert "Reaching 15.0x would take 24,300 jobs/s" in goals
    assert "bounds it near 39,400 jobs/s" in goals
    assert "| 1,620 (bullmq (default)) | 9.88x (9.49\N{EN DASH}10.3) |" in goals


def test_the_peers_memory_cell_of_identical_repetitions_says_they_were_equal(tmp_path: Path) -> None:
    # results/...cc5de8.json, redis-8.2: dramatiq, celery and huey each measured one slope three times
    doc = copy.deepcopy(make_run())
    for row in doc["peers"]["rows"]:
        if row["scenario"] == "memory" and row["library"] == "bullmq":
            row["metrics"]["bytes_per_job"] = metric(435.9764, "B", spread=0.0)
    speed = _render(tmp_path, doc, "peers_speed")
    dash = "\N{EM DASH}"
    assert f"| bullmq (default) | 10.0 (9.8{DASH}10.2) | {dash} | {dash} | 436 (all 3 equal) |" in speed
