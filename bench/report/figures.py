"""Plotly figures as data-only ``<div>`` elements that ``docs/assets/charts.js`` draws.

Figures are built with plotly's graph_objects and serialised with plotly's own JSON. Every trace
name must be unique within a figure (it names what varies), a trace has one value per x, and bars
are grouped, never stacked: :func:`chart` refuses a figure that breaks any of these rules.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.compare import noise_label
from bench.report.load import ReportError
from bench.report.text import RANGE_UP_TO


def chart(fig: go.Figure, chart_id: str) -> str:
    """The figure as ``<div class="cv-chart" data-cv-chart="...">``."""
    names = [t.name for t in fig.data]
    if len(set(names)) != len(names) or any(not n for n in names):
        raise ReportError(f"chart {chart_id}: trace labels must be unique and set, got {names}")
    if fig.layout.barmode not in (None, "group"):
        raise ReportError(f"chart {chart_id}: bars must be grouped, not {fig.layout.barmode}")
    for trace in fig.data:  # two values of one trace at one x would be drawn on top of each other
        xs = [] if trace.x is None else list(trace.x)
        if len(set(map(str, xs))) != len(xs):
            raise ReportError(f"chart {chart_id}: trace {trace.name!r} has two values at one x, got {xs}")
    fig.update_layout(template="none", barmode="group", separators=".,", title={"x": 0.0, "xanchor": "left"},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right",
                              "x": 1.0})
    payload = html.escape(fig.to_json(), quote=True)
    return f'<div class="cv-chart" id="chart-{chart_id}" data-cv-chart="{payload}"></div>'


def spread_bars(frame: pd.DataFrame) -> dict[str, object]:
    """Error bars of the spread the tables show (text.fmt_stat): from min to max for up to
    RANGE_UP_TO repetitions, else one MAD either side."""
    if {"min", "max", "n"} <= set(frame) and len(frame) and (frame["n"] <= RANGE_UP_TO).all():
        return {"type": "data", "symmetric": False, "array": (frame["max"] - frame["median"]).tolist(),
                "arrayminus": (frame["median"] - frame["min"]).tolist(), "visible": True}
    return {"type": "data", "array": frame["mad"].tolist(), "visible": True}


def figure(title: str, x_title: str, y_title: str, *, log_y: bool = False,
           category_x: bool = False) -> go.Figure:
    """An empty figure with titles and axes set: a linear y axis starts at zero (a difference
    within the noise must not fill the chart); a log one cannot, and its title says it is log."""
    fig = go.Figure()
    fig.update_layout(title={"text": title}, xaxis={"title": {"text": x_title}},
                      yaxis={"title": {"text": y_title}, "rangemode": "tozero"})
    if log_y:
        fig.update_yaxes(type="log", rangemode="normal", title={"text": f"{y_title} (log axis)"})
    if category_x:
        fig.update_xaxes(type="category")
    return fig


def plot(rows: pd.DataFrame, x: str, series: str | None, name: Callable[[Any], str], *, title: str,
         x_title: str, y_title: str, lines: bool = False, sort: bool = True, **axes: Any) -> go.Figure:
    """Medians of ``rows`` with spread error bars (spread_bars): grouped bars (or, with ``lines``,
    lines over a numeric x, log scale when it spans 8x; a log y axis when the medians span 10x or more, so the
    small bars stay readable), a trace per value of ``series`` named ``name(value)``."""
    medians = rows["median"].dropna() if "median" in rows else pd.Series(dtype=float)
    if "log_y" not in axes and len(medians) and medians.min() > 0 and medians.max() / medians.min() >= 10:
        axes["log_y"] = True
    fig = figure(title, x_title, y_title, **axes)
    values = rows[x].dropna()
    if lines and len(values) and values.min() > 0 and values.max() / values.min() >= 8:
        fig.update_xaxes(type="log", tickvals=sorted(values.unique()))
    for key, group in rows.groupby(series, sort=sort, observed=True) if series else [(None, rows)]:
        part = group.sort_values(x) if lines else group
        style = {"mode": "lines+markers"} if lines else {}
        bars = spread_bars(part) if "mad" in part else None  # no spread: no error bars
        fig.add_trace((go.Scatter if lines else go.Bar)(x=part[x].tolist(), y=part["median"].tolist(),
                                                        name=name(key), error_y=bars, **style))
    return fig


def ratio_bars(columns: dict[str, pd.DataFrame], title: str, reference: str) -> go.Figure:
    """Grouped bars of ratios (columns ``point``, ``ratio``, ``lo``, ``hi``, ``noise``) with whiskers
    from ``lo`` to ``hi``; bars with no difference to call out are pale and labelled."""
    fig = figure(f"{title} (pale: not called out)", "", f"ratio to {reference} (above 1 = better)",
                 category_x=True)
    for name, found in columns.items():
        fig.add_trace(go.Bar(x=found.point.str.replace(", ", ",<br>"), y=found.ratio, name=name,
                             error_y={"type": "data", "symmetric": False, "visible": True,
                                      "array": (found.hi - found.ratio).tolist(),
                                      "arrayminus": (found.ratio - found.lo).tolist()},
                             text=_noise_labels(found), textangle=0,
                             textposition="inside", insidetextanchor="start", textfont={"size": 9},
                             marker={"opacity": [0.35 if n else 1.0 for n in found.noise]}))
    fig.add_hline(y=1, line_dash="dot")
    fig.update_xaxes(tickangle=0)
    return fig


def _noise_labels(found: pd.DataFrame) -> list[str]:
    """Bar labels: ``noise`` where the ranges overlap, ``within 10%`` where they are apart."""
    rows = found.to_dict("records")
    return [noise_label(row) if row["noise"] else "" for row in rows]


def metric_lines(rows: pd.DataFrame, specs: tuple[tuple[str, str], ...], chart_id: Callable[[str], str],
                 y_title: Callable[[str, str], str], *, x: str, series: str, **layout: Any) -> list[str]:
    """A :func:`plot` of lines per measured ``(metric, title)`` of ``specs``; ``y_title(metric, unit)``."""
    return [chart(plot(part, x, series, title=title, y_title=y_title(name, part.unit.iloc[0]), lines=True,
                       **layout), chart_id(name))
            for name, title in specs if not (part := rows[rows.metric == name]).empty]
