"""History page: each headline metric over Conveyor versions, from every committed full run.

A point is one run's median with its within-run MAD as error bar, placed at that run's
version and commit. Runs are joined by a line only within one group: the same machine (label,
CPU, cores), the same method and the same case parameters. A point from another machine or
method starts its own trace, so no line ever suggests a trend across a change of setup.
Where a group holds several runs, the table puts the spread across runs beside the typical
within-run MAD: the gap between the two is the run-to-run noise a single run cannot show.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.compare import BASELINE, DEFAULT_CONFIGS, select
from bench.report.figures import chart, figure, mad_bars
from bench.report.load import Dataset
from bench.report.text import fmt, fmt_stat, md_table, metric_label, no_data, params_text, unit_of

SERVER = "valkey-9.1"


@dataclass(frozen=True)
class Headline:
    """One tracked figure: a scenario's metric on cases matching ``where`` (None: absent)."""

    key: str
    title: str
    scenario: str
    metric: str
    where: dict[str, Any] = field(default_factory=dict)


HEADLINES = (
    Headline("enqueue-single", "Enqueue, one job per call", "enqueue-single", "jobs_per_s",
             {"payload_bytes": 64}),
    Headline("enqueue-bulk", "Bulk enqueue, one producer", "enqueue-bulk", "jobs_per_s",
             {"payload_bytes": 64, "producers": [1, None]}),
    Headline("process", "Processing, concurrency 32", "process", "jobs_per_s", {"concurrency": 32}),
    Headline("lifecycle", "Full lifecycle, concurrency 32, 64 B", "lifecycle", "lifecycles_per_s",
             {"concurrency": 32, "payload_bytes": 64}),
    Headline("latency", "Unloaded end-to-end latency p99", "latency", "p99_ms", {"load": "unloaded"}),
    Headline("memory", "Memory per waiting job, 256 B payload", "memory", "bytes_per_job",
             {"payload_bytes": 256}),
    Headline("reference", "Machine check: EVALSHA, one at a time (no Conveyor)", "reference",
             "evalsha_c1_ops_per_s"),
)


def _matches(frame: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """Rows equal to ``where``; a list allows several values, None allows the column absent."""
    for key, wanted in where.items():
        options = wanted if isinstance(wanted, list) else [wanted]
        column = frame[key] if key in frame.columns else pd.Series(pd.NA, index=frame.index)
        mask = column.isin([o for o in options if o is not None])
        if None in options:
            mask |= column.isna()
        frame = frame[mask.fillna(False).astype(bool)]
    return frame


def method_names(ds: Dataset) -> dict[str, str]:
    """A letter per distinct method (in order of first use), with what it is."""
    names: dict[str, str] = {}
    for key in ds.runs.method:
        if key not in names:
            m = json.loads(key)
            extra = f", sizes {json.dumps(m['params'])}" if m.get("params") else ""
            names[key] = (f"{chr(ord('A') + len(names))} ({m.get('repetitions')} repetitions, "
                          f"{m.get('warmup')} warm-up{extra})")
    return names


def points(ds: Dataset, h: Headline) -> pd.DataFrame:
    """One row per full run holding the headline: its median, MAD, version, commit and group."""
    rows = select(ds.summary, scenario=h.scenario, metric=h.metric, server=SERVER,
                  **{**BASELINE, "config": list(DEFAULT_CONFIGS)})
    rows = _matches(rows, h.where)
    if rows.empty:
        return rows
    runs = ds.runs[~ds.runs.quick]
    rows = rows[rows.run_id.isin(runs.index)].copy()
    if rows.empty:
        return rows
    methods = method_names(ds)
    run = runs.loc[rows.run_id]
    rows["version"] = [d["conveyor_version"] for d in run.doc]
    rows["commit"] = run.commit.str[:7].tolist()
    rows["created"] = run.created.tolist()
    rows["group"] = [f"{r.machine} ({r.cpu}, {r.cores} cores), method {methods[r.method].split()[0]}"
                     for r in run.itertuples()]
    rows["method_text"] = [methods[m] for m in run.method]
    rows["x"] = [f"{v} · {c}" for v, c in zip(rows.version, rows.commit, strict=True)]
    rows = rows.sort_values(["created", "run_id"])
    dup = rows.duplicated("x", keep=False)
    rows.loc[dup, "x"] = rows.loc[dup, "x"] + " · " + rows.loc[dup, "run_id"].str[:15]
    return rows


def _trace_name(group: str, case: str, cases: int) -> str:
    if cases == 1:
        return group
    return f"{group}, {params_text(json.loads(case)) or case}"


def history_figure(h: Headline, frame: pd.DataFrame) -> go.Figure:
    """One trace per (machine, method, case) group, in run order, MAD as error bars."""
    unit = unit_of(h.metric, str(frame.unit.iloc[0]))
    fig = figure(h.title, "Conveyor version · commit (run order)", metric_label(h.metric, unit),
                 category_x=True)
    fig.update_xaxes(categoryorder="array", categoryarray=frame.x.tolist())
    fig.update_layout(showlegend=True)  # the legend names the machine and method even for one line
    cases = frame.case.nunique()
    for (group, case), part in frame.groupby(["group", "case"], sort=False):
        hover = [f"run {r.run_id}<br>{r.created}<br>commit {r.commit}<br>n={r.n}"
                 for r in part.itertuples()]
        fig.add_trace(go.Scatter(x=part.x.tolist(), y=part["median"].tolist(), mode="lines+markers",
                                 name=_trace_name(str(group), str(case), cases), error_y=mad_bars(part),
                                 text=hover, hovertemplate="%{y}<br>%{text}<extra></extra>"))
    return fig


def spread_table(frame: pd.DataFrame) -> str:
    """Per group: runs, spread of run medians (range as % of their median) and within-run MAD %."""
    out = []
    for (group, case), part in frame.groupby(["group", "case"], sort=False):
        medians = part["median"].tolist()
        within = statistics.median((part["mad"] / part["median"].abs() * 100).tolist())
        if len(medians) > 1:
            centre = statistics.median(medians)
            across = f"{(max(medians) - min(medians)) / abs(centre) * 100:.1f}%"
        else:
            across = "one run only"
        out.append({"machine and method": group, "case": params_text(json.loads(str(case))),
                    "runs": len(medians), "spread across runs (range of medians)": across,
                    "within-run MAD (median over runs)": f"{within:.1f}%"})
    return md_table(pd.DataFrame(out))


def runs_table(h: Headline, frame: pd.DataFrame) -> str:
    """Every point: version, commit, run, machine/method, median ± MAD."""
    unit = unit_of(h.metric, str(frame.unit.iloc[0]))
    table = pd.DataFrame({
        "version": frame.version, "commit": [f"`{c}`" for c in frame.commit],
        "run": frame.run_id, "machine and method": frame.group,
        f"{metric_label(h.metric, unit)} median ± MAD": [
            fmt_stat(r["median"], r["mad"], int(r["n"])) for _, r in frame.iterrows()],
        "repetitions": [fmt(float(n), 0) for n in frame.n],
    })
    return md_table(table)


def headline_section(ds: Dataset, h: Headline) -> str:
    """Chart, spread table and runs table of one headline."""
    frame = points(ds, h)
    if frame.empty:
        return f"### {h.title}\n\n" + no_data(f"`{h.scenario}` {h.metric} on {SERVER}")
    return "\n\n".join([
        f"### {h.title}", chart(history_figure(h, frame), f"history-{h.key}"),
        "Run-to-run noise beside within-run noise:", spread_table(frame),
        "??? note \"Every run\"\n\n" + "\n".join("    " + line for line in runs_table(h, frame).splitlines()),
    ])


def history_section(ds: Dataset, prefix: str = "") -> str:
    """The whole History page body."""
    if ds.empty:
        return no_data("any run")
    methods = "\n".join(f"- method {text}" for text in dict.fromkeys(method_names(ds).values()))
    body = [f"Methods of the committed runs:\n\n{methods}"]
    body += [headline_section(ds, h) for h in HEADLINES]
    return "\n\n".join(body) + "\n"


SECTIONS = {"history_section": history_section}
__all__ = ["HEADLINES", "SECTIONS", "history_section", "points"]
