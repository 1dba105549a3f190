"""Statistics used by the benchmark suite (pure Python, no numpy needed).

Per metric we keep every repetition's raw value and report the median, the MAD
(median absolute deviation, unscaled), min and max. Percentiles of latency samples
use linear interpolation between closest ranks (numpy's default "linear" method).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

STATISTICS_TEXT = (
    "median, MAD (unscaled median absolute deviation), min and max of per-repetition values "
    "(count: repetitions that reported the metric); one fresh process and one server flush per "
    "case and repetition, warm-up repetitions discarded"
)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    if not values:
        raise ValueError("mad() of an empty sequence")
    med = statistics.median(values)
    return float(statistics.median([abs(v - med) for v in values]))


def summarize(values: Sequence[float], unit: str) -> dict[str, Any]:
    """Return the metric record stored in result files for ``values``."""
    vals = [float(v) for v in values]
    if not vals or any(not math.isfinite(v) for v in vals):
        raise ValueError(f"cannot summarize {values!r}: empty or not finite")
    return {
        "unit": unit,
        "count": len(vals),
        "values": vals,
        "median": float(statistics.median(vals)),
        "mad": mad(vals),
        "min": min(vals),
        "max": max(vals),
    }


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile ``q`` (0-100) of already sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile() of an empty sequence")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def latency_summary(
    samples_s: Sequence[float], quantiles: Sequence[float], prefix: str = ""
) -> dict[str, float]:
    """Summarize latency samples in seconds as ``{prefix}p50_ms``... and ``{prefix}max_ms``."""
    ordered = sorted(samples_s)
    out = {f"{prefix}{_qname(q)}_ms": percentile(ordered, q) * 1e3 for q in quantiles}
    out[f"{prefix}max_ms"] = ordered[-1] * 1e3
    return out


def _qname(q: float) -> str:
    """50 -> 'p50', 99.9 -> 'p99_9'."""
    text = f"{q:g}".replace(".", "_")
    return f"p{text}"


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    return float(statistics.linear_regression(xs, ys).slope)


def relative_mad(metric: dict[str, Any]) -> float:
    """MAD as a share of the median (0 when the median is 0)."""
    med = metric["median"]
    return float(metric["mad"] / abs(med)) if med else 0.0
