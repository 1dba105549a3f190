"""Pure statistics of `bench.compare`: verdicts need both a minimum effect and significance."""

from __future__ import annotations

import random

import pytest

from bench.compare.verdict import (
    TooFewRuns,
    better_direction,
    compare,
    mad_pct,
    mann_whitney_p,
    smallest_p,
)


def noisy(median: float, n: int, spread: float, seed: int) -> list[float]:
    """n values around ``median`` with a relative jitter of about ``spread``."""
    rng = random.Random(seed)
    return [median * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_injected_20_percent_slowdown_is_flagged_slower_with_p_below_001() -> None:
    base = noisy(10_000, 8, 0.02, seed=1)
    head = [v * 0.8 for v in noisy(10_000, 8, 0.02, seed=2)]
    result = compare(base, head, metric="jobs_per_s", unit="1/s")
    assert result.verdict == "slower"
    assert result.change == "regressed"
    assert result.p_value is not None and result.p_value < 0.01
    assert result.diff_pct == pytest.approx(-20, abs=3)


def test_five_runs_fully_separated_reach_significance() -> None:
    base = [100.0, 101, 102, 103, 104]
    head = [120.0, 121, 122, 123, 124]
    result = compare(base, head, metric="jobs_per_s", unit="1/s")
    assert result.verdict == "faster"
    assert result.p_value == pytest.approx(smallest_p(5, 5))


def test_identical_inputs_are_within_noise() -> None:
    values = noisy(5000, 5, 0.03, seed=3)
    result = compare(values, list(values), metric="jobs_per_s", unit="1/s")
    assert result.verdict == "within noise"
    assert result.diff_pct == 0
    assert result.p_value is not None and result.p_value > 0.5


def test_constant_identical_values_are_within_noise() -> None:
    result = compare([4.0] * 5, [4.0] * 5, metric="connections_total", unit="connections")
    assert result.verdict == "within noise"
    assert result.p_value == 1.0


def test_two_percent_change_at_the_noise_floor_is_not_flagged() -> None:
    # Fully separated (so significant) but below the 5% minimum effect.
    base = noisy(10_000, 10, 0.002, seed=4)
    head = [v * 1.02 for v in noisy(10_000, 10, 0.002, seed=5)]
    result = compare(base, head, metric="jobs_per_s", unit="1/s")
    assert result.p_value is not None and result.p_value < 0.01
    assert result.verdict == "within noise"


def test_large_but_unsupported_difference_is_not_flagged() -> None:
    base = [100.0, 50, 150, 80, 120]
    head = [90.0, 40, 160, 60, 100]
    result = compare(base, head, metric="jobs_per_s", unit="1/s")
    assert abs(result.diff_pct or 0) >= 5
    assert result.verdict == "within noise"


@pytest.mark.parametrize(
    ("metric", "unit", "head_factor", "verdict"),
    [
        ("p99_ms", "ms", 1.3, "slower"),
        ("p99_ms", "ms", 0.7, "faster"),
        ("bytes_per_job", "B", 1.3, "larger"),
        ("bytes_per_job", "B", 0.7, "smaller"),
        ("connections_total", "connections", 1.3, "worse"),
    ],
)
def test_direction_per_metric(metric: str, unit: str, head_factor: float, verdict: str) -> None:
    base = [100.0, 101, 99, 100.5, 99.5]
    head = [v * head_factor for v in base]
    assert compare(base, head, metric=metric, unit=unit).verdict == verdict


def test_better_direction() -> None:
    assert better_direction("jobs_per_s", "1/s") == "higher"
    assert better_direction("p99_ms", "ms") == "lower"
    assert better_direction("bytes_per_job", "B") == "lower"
    assert better_direction("offered_per_s", "1/s") is None
    assert better_direction("jobs", "count") is None  # the size a min_seconds case chose
    assert better_direction("elapsed_s", "s") is None
    assert better_direction("failed_calls", "count") == "lower"


def test_metric_not_judged_gets_no_verdict() -> None:
    result = compare([1.0, 2, 3], [10.0, 20, 30], metric="offered_per_s", unit="1/s")
    assert result.verdict == "not judged"


def test_failures_appearing_from_zero_are_flagged() -> None:
    result = compare([0.0] * 5, [3.0, 4, 3, 5, 4], metric="failed_calls", unit="count")
    assert result.diff_pct is None
    assert result.verdict == "worse"


def test_fewer_than_three_runs_is_refused() -> None:
    with pytest.raises(TooFewRuns, match="head has 2 run"):
        compare([1.0, 2, 3], [1.0, 2], metric="jobs_per_s", unit="1/s")


def test_mad_pct_and_smallest_p() -> None:
    assert mad_pct([100.0, 110, 90, 100, 105]) == pytest.approx(5.0)
    assert mad_pct([0.0, 0, 0]) == 0.0
    assert smallest_p(3, 3) == pytest.approx(0.1)
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert mann_whitney_p([1.0, 1, 1], [1.0, 1, 1]) == 1.0


