"""Pure statistics of a base/head comparison: medians, MAD %, difference, significance, verdict.

A verdict needs both a minimum effect (the medians differ by at least ``min_effect``) and
significance (two-sided Mann-Whitney U, ``p < alpha``): a large difference that the runs do not
support, or a significant one too small to matter, is "within noise".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import mannwhitneyu

MIN_RUNS = 3
DEFAULT_MIN_EFFECT = 0.05
DEFAULT_ALPHA = 0.01

# Metrics that describe the load offered or the size a case chose (job counts, the duration of a
# run sized to last min_seconds), not how well Conveyor did. Counts other than failures are sizes.
NOT_JUDGED = frozenset({"offered_per_s", "offered_load", "elapsed_s", "worker_run_s"})
TIME_UNITS = frozenset({"1/s", "ms", "s", "us"})


class TooFewRuns(ValueError):
    """A side has fewer than MIN_RUNS values: no spread, so no verdict."""


@dataclass(frozen=True)
class Comparison:
    """One metric of one case, base against head."""

    unit: str
    better: str | None  # "higher", "lower", or None when the metric is not judged
    n_base: int
    n_head: int
    base_median: float
    base_mad_pct: float
    head_median: float
    head_mad_pct: float
    diff_pct: float | None
    p_value: float | None
    change: str  # "improved", "regressed", "noise", "not judged"
    verdict: str  # wording of the change for this unit: faster/slower/smaller/..., "within noise"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return asdict(self)


def better_direction(metric: str, unit: str) -> str | None:
    """"higher" for rates, "lower" for times, bytes, connections and failures, None if not judged."""
    if metric in NOT_JUDGED or unit == "ratio" or (unit == "count" and not metric.startswith("failed")):
        return None
    return "higher" if unit == "1/s" else "lower"


def mad_pct(values: Sequence[float]) -> float:
    """Unscaled median absolute deviation as a percentage of the median (0 if the median is 0)."""
    med = statistics.median(values)
    mad = statistics.median([abs(v - med) for v in values])
    return 100.0 * mad / abs(med) if med else 0.0


def smallest_p(n_base: int, n_head: int) -> float:
    """The smallest two-sided exact Mann-Whitney p reachable with these sample sizes."""
    return 2.0 / math.comb(n_base + n_head, n_base)


def mann_whitney_p(base: Sequence[float], head: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (1.0 when every value is the same)."""
    if len(set(base) | set(head)) == 1:
        return 1.0
    return float(mannwhitneyu(base, head, alternative="two-sided").pvalue)


def _wording(unit: str, improved: bool) -> str:
    """faster/slower for rates and times, smaller/larger for bytes, better/worse otherwise."""
    if unit in TIME_UNITS:
        return "faster" if improved else "slower"
    if unit == "B":
        return "smaller" if improved else "larger"
    return "better" if improved else "worse"


def compare(
    base: Sequence[float],
    head: Sequence[float],
    *,
    metric: str,
    unit: str,
    min_effect: float = DEFAULT_MIN_EFFECT,
    alpha: float = DEFAULT_ALPHA,
) -> Comparison:
    """Compare the runs of one metric; raise :class:`TooFewRuns` if a side has fewer than 3."""
    for side, values in (("base", base), ("head", head)):
        if len(values) < MIN_RUNS:
            raise TooFewRuns(f"{metric}: {side} has {len(values)} run(s), at least {MIN_RUNS} needed")
    better = better_direction(metric, unit)
    b_med, h_med = statistics.median(base), statistics.median(head)
    diff = 100.0 * (h_med - b_med) / abs(b_med) if b_med else (0.0 if h_med == b_med else None)
    p = mann_whitney_p(base, head)
    change = _change(better, h_med - b_med, diff, significant=p < alpha, min_effect=min_effect)
    if change in ("improved", "regressed"):
        verdict = _wording(unit, change == "improved")
    else:
        verdict = "within noise" if change == "noise" else "not judged"
    return Comparison(
        unit=unit, better=better, n_base=len(base), n_head=len(head),
        base_median=b_med, base_mad_pct=mad_pct(base), head_median=h_med,
        head_mad_pct=mad_pct(head), diff_pct=diff, p_value=p, change=change, verdict=verdict,
    )


def _change(
    better: str | None, delta: float, diff: float | None, *, significant: bool, min_effect: float
) -> str:
    """improved / regressed only when the effect is large enough AND significant.

    ``diff`` is None when the base median is 0 and the head's is not (say failed calls going from
    0 to 3): any such change is large enough, so only significance decides.
    """
    if better is None:
        return "not judged"
    large = diff is None or abs(diff) >= 100.0 * min_effect
    if delta == 0 or not large or not significant:
        return "noise"
    return "improved" if (delta > 0) == (better == "higher") else "regressed"
