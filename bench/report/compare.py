"""Like-for-like comparisons: selection of cases, ratios with whiskers, noise and verdicts.

A difference is stated only beyond ``THRESHOLD`` with the repetitions' ranges apart;
otherwise it is noise. A ratio's whiskers run from the worst to the best pairing of the
two cases' repetitions (min/max against max/min).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.load import Dataset

THRESHOLD = 0.10
BASELINE = {"config": "default", "protocol": 3, "parser": "hiredis"}
DEFAULT_CONFIGS = ("default", "external")


def select(frame: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows of ``frame`` whose columns equal the given values (lists: any of them)."""
    mask = pd.Series(True, index=frame.index)
    for key, value in where.items():
        if key not in frame.columns:
            return frame.iloc[0:0]
        mask &= frame[key].isin(value) if isinstance(value, list | tuple) else frame[key] == value
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


def ratio(a: pd.Series, b: pd.Series) -> dict[str, float | bool]:
    """``a / b`` for two summary rows: ratio of medians, whiskers and whether it is noise."""
    value = a["median"] / b["median"]
    lo, hi = a["min"] / b["max"], a["max"] / b["min"]
    apart = a["min"] > b["max"] or a["max"] < b["min"]
    single = min(a.get("n", 2), b.get("n", 2)) < 2  # one repetition has no spread to judge by
    return {"ratio": value, "lo": lo, "hi": hi,
            "noise": single or not (apart and abs(value - 1) > THRESHOLD)}


def same_method_runs(ds: Dataset, run_id: str) -> list[str]:
    """Runs made with the method and on the machine of ``run_id`` (itself included)."""
    ref = ds.runs.loc[run_id]
    same = ds.runs[(ds.runs.method == ref.method) & (ds.runs.machine == ref.machine)
                   & (ds.runs.cpu == ref.cpu) & (ds.runs.cores == ref.cores) & ~ds.runs.quick]
    return same.index.tolist()
