"""The comparison table: one row per case and metric, with its A/A noise floor when measured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from bench import scenarios
from bench.compare import CompareError
from bench.compare.samples import REFERENCE, Case, Side, common_keys
from bench.compare.verdict import Comparison, TooFewRuns, compare, smallest_p


@dataclass(frozen=True)
class Row:
    """One case and metric: base vs head, and base vs base again (A/A) when available."""

    case: Case
    metric: str
    result: Comparison
    aa: Comparison | None
    headline: bool
    values: dict[str, list[float]]  # every run's value per side ("base", "head", "aa")

    @property
    def reference(self) -> bool:
        """A machine ceiling (PING, EVALSHA without Conveyor), not a Conveyor figure."""
        return self.case.scenario == REFERENCE

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "scenario": self.case.scenario, "variant": self.case.variant, "case": self.case.label,
            "metric": self.metric, "headline": self.headline, "reference": self.reference,
            **self.result.as_dict(), "aa": self.aa.as_dict() if self.aa else None,
            "values": self.values,
        }


def headline_metrics(scenario: str) -> tuple[str, ...]:
    """The scenario's headline metrics (every reference ceiling is one)."""
    try:
        module = scenarios.load(scenario)
    except KeyError:
        return ()
    return tuple(getattr(module, "HEADLINE", ()))


def build_rows(
    base: Side, head: Side, aa: Side | None, *, min_effect: float, alpha: float
) -> list[Row]:
    """Compare every case/metric measured on both sides; refuse a side with fewer than 3 runs."""
    rows = []
    for case, metric in common_keys(base, head):
        key = (case, metric)
        unit = base.units[key]
        try:
            result = compare(base.values[key], head.values[key], metric=metric, unit=unit,
                             min_effect=min_effect, alpha=alpha)
            floor = None
            if aa is not None and key in aa.values:
                floor = compare(base.values[key], aa.values[key], metric=metric, unit=unit,
                                min_effect=min_effect, alpha=alpha)
        except TooFewRuns as exc:
            raise CompareError(f"{case.scenario} {case.label}: {exc}") from exc
        headline = case.scenario == REFERENCE or metric in headline_metrics(case.scenario)
        values = {"base": base.values[key], "head": head.values[key]}
        if floor is not None and aa is not None:
            values["aa"] = aa.values[key]
        rows.append(Row(case, metric, result, floor, headline, values))
    return rows


def noise_floor(rows: list[Row]) -> dict[str, Any] | None:
    """Summary of the A/A pair: typical and largest |difference|, and how many rows it flagged."""
    judged = [r.aa for r in rows if r.aa is not None and r.aa.diff_pct is not None
              and r.aa.better is not None]
    if not judged:
        return None
    diffs = [abs(c.diff_pct) for c in judged if c.diff_pct is not None]
    return {
        "rows": len(judged),
        "median_abs_diff_pct": statistics.median(diffs),
        "max_abs_diff_pct": max(diffs),
        "flagged": sum(c.change in ("improved", "regressed") for c in judged),
    }


def power_note(rows: list[Row], alpha: float) -> str | None:
    """Say so when the run counts make a significant verdict impossible."""
    worst = min(rows, key=lambda r: (r.result.n_base, r.result.n_head), default=None)
    if worst is None:
        return None
    floor = smallest_p(worst.result.n_base, worst.result.n_head)
    if floor < alpha:
        return None
    return (f"With {worst.result.n_base} and {worst.result.n_head} runs the smallest reachable p is "
            f"{floor:.3g} (not below {alpha:g}): no row can be flagged; use 5 or more runs per side.")
