"""History page: each headline metric over Conveyor versions, from every committed full run.

A point is one run's median with its within-run spread as error bar (figures.spread_bars), at that
run's version and commit.
Points are joined by a line only within one group: the same machine (label, CPU, cores),
interpreter, method and case parameters, so no line suggests a trend across a change of setup.
Where a group holds several runs, the spread across runs stands beside the typical within-run
MAD: the run-to-run noise.
"""

from __future__ import annotations

import json

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.common import stat_cell
from bench.report.compare import BASELINE, DEFAULT_CONFIGS, select
from bench.report.figures import chart, figure, spread_bars
from bench.report.load import Dataset
from bench.report.points import POINTS, Point
from bench.report.text import (
    STAT_HEADER,
    admonition,
    fmt,
    md_table,
    metric_label,
    no_data,
    params_text,
    unit_of,
)

SERVER = "valkey-9.1"


# Every stated point, each over the committed full runs (the machine check last).
HEADLINES = POINTS


def title(h: Point) -> str:
    """The point's label as a heading: ``Lifecycle, 64 B, 8 tasks``."""
    return h.label[0].upper() + h.label[1:]


# method fields that tell methods apart for a reader (the client and what a run measured), each
# shown where methods differ in it; repetitions and warm-up are always shown
TELLING = {"driver": "driver", "loop": "loop", "beside": "twins beside each case", "parsers": "parsers",
           "protocols": "RESP", "warmup_scale": "warm-up sizes scaled by"}


def method_names(ds: Dataset) -> dict[str, str]:
    """A letter per distinct method (in order of first use), with what it is: its repetitions and
    warm-up, and every field of :data:`TELLING` in which the methods differ (two methods that read
    the same, "3 repetitions, 1 warm-up", would not say why their points are never joined)."""
    methods = {key: json.loads(key) for key in dict.fromkeys(ds.runs.method)}
    differ = [f for f in TELLING if len({json.dumps(m.get(f)) for m in methods.values()}) > 1]
    names: dict[str, str] = {}
    for key, m in methods.items():
        sizes = f", sizes {json.dumps(m['params'])}" if m.get("params") else ""
        shown = [f"{TELLING[f]} {', '.join(map(str, v)) if isinstance(v, list) else v}"
                 for f in differ if (v := m.get(f)) not in (None, [])]
        reps = m.get("repetitions")
        names[key] = (f"{chr(65 + len(names))} ({reps} repetition{'s' * (reps != 1)}, "
                      f"{m.get('warmup')} warm-up{sizes}{''.join('; ' + t for t in shown)})")
    return names


def points(ds: Dataset, h: Point) -> pd.DataFrame:
    """One row per full run holding the headline: median, MAD, version, commit and group."""
    rows = h.rows(select(ds.summary, server=SERVER, **{**BASELINE, "config": list(DEFAULT_CONFIGS)}))
    rows = rows[rows.run_id.isin(ds.runs.index[~ds.runs.quick])]
    if rows.empty:
        return rows
    methods, run = method_names(ds), ds.runs.loc[rows.run_id]
    rows = rows.assign(version=[d["conveyor_version"] for d in run.doc], commit=run.commit.str[:7].tolist(),
                       created=run.created.tolist(),
                       group=[f"{r.machine} ({r.cpu}, {r.cores} cores), {r.python}, "
                              f"method {methods[r.method][0]}"
                              for r in run.itertuples()]).sort_values(["created", "run_id"])
    rows["x"] = rows.version + " · " + rows.commit
    dup = rows.duplicated("x", keep=False)
    rows.loc[dup, "x"] += " · " + rows.loc[dup, "run_id"].str[:15]
    return rows


def history_figure(h: Point, frame: pd.DataFrame) -> go.Figure:
    """One trace per (machine, method, case) group, in run order, the spread as error bars."""
    fig = figure(title(h), "Conveyor version · commit (run order)",
                 metric_label(h.metric, unit_of(h.metric, str(frame.unit.iloc[0]))), category_x=True)
    fig.update_xaxes(categoryorder="array", categoryarray=frame.x.tolist())
    fig.update_layout(showlegend=True)  # the legend names the machine and method even for one line
    several = frame.case.nunique() > 1
    for (group, case), part in frame.groupby(["group", "case"], sort=False):
        name = f"{group}, {params_text(json.loads(case)) or case}" if several else group
        hover = [f"run {r.run_id}<br>{r.created}<br>commit {r.commit}<br>n={r.n}"
                 for r in part.itertuples()]
        fig.add_trace(go.Scatter(x=part.x.tolist(), y=part["median"].tolist(), mode="lines+markers",
                                 name=name, error_y=spread_bars(part), text=hover,
                                 hovertemplate="%{y}<br>%{text}<extra></extra>"))
    return fig


# A group's runs may span commits: its spread then holds code changes as well as noise.
SPREAD_INTRO = ("Spread across runs beside within-run noise (where a group's runs span several commits, "
                "its spread holds the changes between them as well as run-to-run noise):")


def spread_table(frame: pd.DataFrame) -> str:
    """Per group: runs, range of the run medians and typical within-run MAD, both as % of the median."""
    within = frame["mad"] / frame["median"].abs() * 100
    groups = frame.assign(within=within).groupby(["group", "case"], sort=False)
    out = groups.agg(runs=("median", "size"), commits=("commit", "nunique"), lo=("median", "min"),
                     hi=("median", "max"), centre=("median", "median"),
                     within=("within", "median")).reset_index()
    # three significant digits at most, as every measured figure on the site (not "112.5%")
    across = ((out.hi - out.lo) / out.centre.abs() * 100).map(lambda v: f"{v:.{1 if v < 100 else 0}f}%")
    return md_table(pd.DataFrame({
        "machine and method": out.group, "case": [params_text(json.loads(c)) for c in out.case],
        "runs": out.runs, "commits": out.commits,
        "spread across runs (range of medians)": across.where(out.runs > 1, "one run only"),
        "within-run MAD (median over runs)": out.within.map(lambda v: f"{v:.1f}%")}))


def client(params: dict[str, object]) -> str:
    """``driver glide``, ``loop uvloop`` or ``default client`` (redis-py on the asyncio loop)."""
    return ", ".join(f"{k} {params[k]}" for k in ("driver", "loop") if k in params) or "default client"


def runs_table(h: Point, frame: pd.DataFrame) -> str:
    """Every point: version, commit, run, machine and method, median and spread."""
    label = metric_label(h.metric, unit_of(h.metric, str(frame.unit.iloc[0])))
    return md_table(pd.DataFrame({
        "version": frame.version, "commit": "`" + frame.commit + "`", "run": frame.run_id,
        # a run with twins (--beside) holds several points: say which client each is (the whole
        # case is in the table above; a column of its own would not fit the page)
        "machine, method and client": [f"{g}, {client(json.loads(c))}"
                                       for g, c in zip(frame.group, frame.case, strict=True)],
        f"{label} {STAT_HEADER}": [stat_cell(r) for _, r in frame.iterrows()],
        "repetitions": [fmt(float(n), 0) for n in frame.n]}))


def headline_section(ds: Dataset, h: Point) -> str:
    """Chart, spread table and runs table of one headline."""
    frame = points(ds, h)
    if frame.empty:
        return f"### {title(h)}\n\n" + no_data(f"`{h.scenario}` {h.metric} on {SERVER}")
    return "\n\n".join([f"### {title(h)}", chart(history_figure(h, frame), f"history-{h.scenario}"),
                        SPREAD_INTRO, spread_table(frame),
                        admonition("note", "Every run", runs_table(h, frame), "???").rstrip("\n")])


def history_section(ds: Dataset, prefix: str = "") -> str:
    """The whole History page body."""
    if ds.empty:
        return no_data("any run")
    methods = "\n".join(f"- method {text}" for text in method_names(ds).values())
    return "\n\n".join([f"Methods of the committed runs:\n\n{methods}",
                        *(headline_section(ds, h) for h in HEADLINES)]) + "\n"


SECTIONS = {"history_section": history_section}
