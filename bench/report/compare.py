"""Like-for-like comparisons: selection of cases, ratios to a baseline with whiskers, noise.

A difference is stated only beyond ``THRESHOLD`` with the repetitions' ranges apart. With the
ranges overlapping (or one repetition, which has no range to judge by) it is noise; with them
apart but the difference within ``THRESHOLD`` it is not called out either, and is labelled
"within 10%", not noise: the repetitions do tell the cases apart. A ratio's whiskers run from the worst to
the best pairing of the two cases' repetitions (min/max against max/min).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.report.load import Dataset
from bench.report.text import pct, span, times

THRESHOLD = 0.10
BASELINE = {"config": "default", "protocol": 3, "parser": "hiredis"}
DEFAULT_CONFIGS = ("default", "external")
STATS = ["median", "min", "max", "n"]


def select(frame: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows of ``frame`` whose columns equal the given values (lists: any of them; a None among them
    also matches where the parameter is absent)."""
    mask = np.ones(len(frame), dtype=bool)  # one take at the end: a frame's take costs per column
    for key, value in where.items():
        values = list(value) if isinstance(value, list | tuple) else [value]
        if key not in frame:  # absent everywhere: only a None matches
            mask &= None in values
            continue
        column = frame[key]
        mask &= column.isin([v for v in values if v is not None]).to_numpy(dtype=bool, na_value=False) | (
            column.isna().to_numpy(dtype=bool) & (None in values))
    return frame[mask]


def prefer(rows: pd.DataFrame, wanted: dict[str, Any], closest: bool = False) -> pd.DataFrame:
    """Rows at the stated conditions ``wanted``; a condition not measured is ignored, or with
    ``closest`` replaced by the largest measured value."""
    for key, value in wanted.items():
        if key in rows and (rows[key] == value).any():
            rows = rows[rows[key] == value]
        elif closest and key in rows:
            rows = rows[rows[key] == rows[key].max()]
    return rows


def versus(rows: pd.DataFrame, base: pd.DataFrame, on: str | list[str], lower_better: bool = False
           ) -> pd.DataFrame:
    """``rows`` joined to ``base`` on ``on`` with ``ratio`` (above 1: better), ``lo``/``hi`` whiskers,
    ``noise`` (no difference to call out) and ``overlap`` (the ranges do not tell the cases apart);
    the base's columns carry the suffix ``_base``."""
    both = rows.merge(base, on=on, suffixes=("", "_base"))
    a, b = both[STATS].set_axis(STATS, axis=1), both[[f"{s}_base" for s in STATS]].set_axis(STATS, axis=1)
    if lower_better:
        a, b = b, a
    value = a["median"] / b["median"]
    apart = (a["min"] > b["max"]) | (a["max"] < b["min"])
    single = pd.concat([a["n"], b["n"]], axis=1).min(axis=1) < 2  # one repetition: no spread to judge by
    overlap = single | ~apart
    return both.assign(ratio=value, lo=a["min"] / b["max"], hi=a["max"] / b["min"],
                       noise=overlap | ((value - 1).abs() <= THRESHOLD), overlap=overlap)


def ratio(a: pd.Series, b: pd.Series) -> dict[str, Any]:
    """``a / b`` for two summary rows: ratio of medians, whiskers and whether it is noise."""
    rows = [pd.DataFrame([{s: row.get(s, 2) for s in STATS} | {"k": 0}]) for row in (a, b)]
    return versus(*rows, on="k").iloc[0][["ratio", "lo", "hi", "noise", "overlap"]].to_dict()


def change(found: Any, noise: str = "within the noise") -> str:
    """``costs 11%``, ``gains 15%``, ``within 10% (gains 5%, ranges apart)`` or the ``noise`` wording
    for a ratio row."""
    verb = "costs" if found["ratio"] < 1 else "gains"
    if not found["noise"]:
        return f"{verb} {pct(abs(1 - found['ratio']))}"
    if found.get("overlap", True):
        return noise
    # one decimal: a 9.8% difference must not read as the 10% it stays within
    return f"within {pct(THRESHOLD)} ({verb} {abs(1 - found['ratio']):.1%}, ranges apart)"


def ratio_text(found: Any, noise: bool = True) -> str:
    """``1.21x (1.15 to 1.30)`` (an en dash): the ratio and its whiskers, ``, noise`` when it is."""
    tail = f", {noise_label(found)}" if noise and found["noise"] else ""
    return f"{times(found['ratio'])} ({span(found['lo'], found['hi'])}){tail}"


def noise_label(found: Any) -> str:
    """``noise`` (the ranges overlap) or ``within 10%`` (apart, but not called out)."""
    return "noise" if found.get("overlap", True) else f"within {pct(THRESHOLD)}"


def same_method_runs(ds: Dataset, run_id: str) -> list[str]:
    """Full runs made with the method, on the machine and under the interpreter of ``run_id``
    (itself included)."""
    ref = ds.runs.loc[run_id]
    same = ds.runs[(ds.runs.method == ref.method) & (ds.runs.machine == ref.machine)
                   & (ds.runs.cpu == ref.cpu) & (ds.runs.cores == ref.cores)
                   & (ds.runs.python == ref.python) & ~ds.runs.quick]
    return same.index.tolist()
