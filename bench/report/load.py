"""Load every result file into tidy pandas frames.

``Dataset.frame`` holds one row per run, server, configuration, protocol, parser, scenario,
parameters, metric and repetition (column ``value``); ``Dataset.summary`` one row per measured
case and metric (median, MAD, min, max, n, computed here from the raw repetitions);
``Dataset.cases`` one row per case with its exactly-once accounting and extras;
``Dataset.runs`` one row per file. Files are validated by :mod:`bench.results` first.

Cases with a ``features`` parameter (``process`` with priorities, a limit key and hooks on) are
kept apart in ``Dataset.featured`` (summary rows): every other table compares like for like
without them, and the feature-cost section reads them from there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import pandas as pd

from bench.results import ResultsError, load_file

CASE = ["run_id", "scenario", "server", "config", "protocol", "parser", "case"]
# Method fields that differ between runs of one method (timings of the run itself).
VOLATILE_METHOD = frozenset({"cell_seconds", "params", "order", "seed", "complete", "headlines",
                             "client_install_bytes"})
RUN_COLUMNS = ["run_id", "rel", "url", "created", "commit", "machine", "cpu", "cores", "python",
               "quick", "repetitions", "method", "doc"]


T = TypeVar("T")


class ReportError(ResultsError):
    """The results cannot be rendered; the message names the file and the field."""


@dataclass(frozen=True)
class Dataset:
    """Every result file below ``root``: runs, cases, tidy repetitions and their summary."""

    root: Path
    runs: pd.DataFrame
    cases: pd.DataFrame
    frame: pd.DataFrame
    summary: pd.DataFrame
    featured: pd.DataFrame
    # Results derived from the frames above, computed once per build (see ``memo``).
    _memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, compare=False, repr=False)

    def memo(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """``compute()``, once per ``key`` for this dataset: several pages quote one comparison
        (the Home page and the Servers page, each run's verdict), and the frames never change."""
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    @property
    def empty(self) -> bool:
        """True when no result file exists yet."""
        return self.runs.empty


def result_paths(root: Path) -> list[Path]:
    """Result JSON files below ``root`` (sorted), skipping ``schema/`` and ``quick/``."""
    skipped = {"schema", "quick"}
    return [p for p in sorted(root.rglob("*.json")) if not skipped & set(p.relative_to(root).parts[:-1])
            ] if root.is_dir() else []


def read(path: Path, root: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """One validated file as (run record, case records, tidy records); errors name the file."""
    doc = load_file(path)
    try:
        env, git, method = doc["environment"], doc["git"], doc["method"]
        rel = path.relative_to(root).as_posix()
        run = {"run_id": doc["run_id"], "rel": rel, "url": f"results/{rel}", "created": doc["created_utc"],
               "commit": git.get("commit") or "",
               "machine": env["machine_label"],
               "cpu": env["cpu_model"], "cores": int(env["cores"]), "quick": bool(method["quick"]),
               "python": f"{env.get('implementation') or 'CPython'} {env['python']}",
               "repetitions": method["repetitions"], "doc": doc, "method": json.dumps(
                   {k: v for k, v in method.items() if k not in VOLATILE_METHOD}, sort_keys=True)}
        cases, tidy = [], []
        for row in doc["results"]:
            once, extra = row.get("exactly_once") or {}, row.get("extra") or {}
            key = {"run_id": doc["run_id"], "scenario": row["scenario"], "server": row["server"],
                   "config": row["config"], "protocol": int(row.get("protocol", 3)),
                   "parser": str(row.get("parser", "hiredis")),
                   "case": json.dumps(row["params"], sort_keys=True)}
            cases.append({**key, "params": row["params"], "encoding": extra.get("encoding"), "extra": extra,
                          "headline": row.get("headline"),
                          **{k: once.get(k) for k in ("enqueued", "acked", "lost", "duplicates")}})
            params = {k: (json.dumps(v) if isinstance(v, list | dict) else v)
                      for k, v in row["params"].items() if k not in key}
            tidy += [{**key, **params, "metric": name, "unit": m["unit"], "rep": i, "value": float(v)}
                     for name, m in row["metrics"].items() for i, v in enumerate(m["values"])]
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read field {exc!s}") from exc
    return run, cases, tidy


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Median, MAD (unscaled), min, max and count of ``value`` per case and metric."""
    grouped = frame.groupby([c for c in frame.columns if c not in ("rep", "value")], dropna=False,
                            sort=False)["value"]
    out = grouped.agg(median="median", min="min", max="max", n="count")
    # Vectorised (a Python call per case took half the load): group numbers follow first
    # appearance, as the rows of ``out`` do with sort=False.
    deviation = (frame["value"] - grouped.transform("median")).abs()
    out["mad"] = deviation.groupby(grouped.ngroup().to_numpy()).median().to_numpy()
    return out.reset_index()


def load(root: Path) -> Dataset:
    """Load every result file below ``root``; a missing or empty directory gives an empty set."""
    runs, cases, tidy, seen = [], [], [], {}
    for path in result_paths(root):
        run, file_cases, file_tidy = read(path, root)
        if run["run_id"] in seen:
            raise ReportError(f"{path}: field run_id {run['run_id']!r} duplicates {seen[run['run_id']]}")
        seen[run["run_id"]] = path
        runs.append(run)
        cases += file_cases
        tidy += file_tidy
    run_frame = pd.DataFrame(runs, columns=RUN_COLUMNS).sort_values(["created", "run_id"])
    run_frame.index = pd.Index(run_frame.run_id.tolist())
    frame = pd.DataFrame(tidy, columns=None if tidy else [*CASE, "metric", "unit", "rep", "value"])
    for col in frame.columns.drop(["value"], errors="ignore"):  # whole-number params stay whole
        if frame[col].dtype == float and (frame[col].dropna() % 1 == 0).all():
            frame[col] = frame[col].astype("Int64")
    case_frame = pd.DataFrame(cases, columns=None if cases else [*CASE, "params"])
    summary = summarise(frame) if tidy else frame.drop(columns=["rep", "value"]).assign(
        median=[], mad=[], min=[], max=[], n=[])
    featured = summary.iloc[0:0]
    if "features" in frame.columns:
        featured = summary[summary.features.notna()]
        summary = summary[summary.features.isna()].drop(columns="features")
        frame = frame[frame.features.isna()].drop(columns="features")
        case_frame = case_frame[[not p.get("features") for p in case_frame.params]]
    return Dataset(root, run_frame, case_frame, frame, summary, featured)


def same_method(ds: Dataset, run_ids: list[str], what: str) -> None:
    """Refuse to put runs of different methods in one comparison (names file and field)."""
    runs = ds.runs.loc[sorted(set(run_ids))]
    methods = [json.loads(m) for m in runs.method]
    fields = [f"method.{k}" for k in sorted(set().union(*methods))
              if len({json.dumps(m.get(k)) for m in methods}) > 1]
    fields += [f"environment.{f}" for f in ("machine", "cpu", "cores") if runs[f].nunique() > 1]
    if fields:
        raise ReportError(f"{what}: result files {', '.join(runs.rel)} differ in field "
                          f"{', '.join(fields)}; they cannot be compared in one table")
