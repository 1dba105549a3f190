"""Plotly figures as data-only ``<div>`` elements that ``docs/assets/charts.js`` draws.

Figures are built with plotly's graph_objects and serialised with plotly's own JSON. Every
trace name must be unique within a figure (it names what varies) and bars are grouped, never
stacked: :func:`chart` refuses a figure that breaks either rule.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.load import ReportError


def chart(fig: go.Figure, chart_id: str) -> str:
    """The figure as ``<div class="cv-chart" data-cv-chart="...">``."""
    names = [t.name for t in fig.data]
    if len(set(names)) != len(names) or any(not n for n in names):
        raise ReportError(f"chart {chart_id}: trace labels must be unique and set, got {names}")
    if fig.layout.barmode not in (None, "group"):
        raise ReportError(f"chart {chart_id}: bars must be grouped, not {fig.layout.barmode}")
    fig.update_layout(template="none", barmode="group", separators=".,",
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "right",
                              "x": 1.0}, title={"x": 0.0, "xanchor": "left"})
    payload = html.escape(fig.to_json(), quote=True)
    return f'<div class="cv-chart" id="chart-{chart_id}" data-cv-chart="{payload}"></div>'


def whiskers(frame: pd.DataFrame, y: str, lo: str, hi: str) -> dict[str, object]:
    """Asymmetric error bars from columns ``lo``..``hi`` around ``y``."""
    return {"type": "data", "symmetric": False, "array": (frame[hi] - frame[y]).tolist(),
            "arrayminus": (frame[y] - frame[lo]).tolist(), "visible": True}


def mad_bars(frame: pd.DataFrame) -> dict[str, object]:
    """Symmetric error bars of one MAD."""
    return {"type": "data", "array": frame["mad"].tolist(), "visible": True}


def bar(x: Any, part: pd.DataFrame, name: str, **style: Any) -> go.Bar:
    """Bars of the ``median`` column of ``part`` with one-MAD error bars."""
    return go.Bar(x=x, y=part["median"], name=name, error_y=mad_bars(part), **style)


def figure(title: str, x_title: str, y_title: str, *, log_y: bool = False,
           category_x: bool = False) -> go.Figure:
    """An empty figure with titles and axes set."""
    fig = go.Figure()
    fig.update_layout(title={"text": title}, xaxis={"title": {"text": x_title}},
                      yaxis={"title": {"text": y_title}, "rangemode": "tozero"})
    if log_y:
        fig.update_yaxes(type="log", rangemode="normal")
    if category_x:
        fig.update_xaxes(type="category")
    return fig


def lines(frame: pd.DataFrame, x: str, y: str, series: Sequence[str], *, title: str,
          x_title: str, y_title: str, label: Callable[[Any], str]) -> go.Figure:
    """One line per combination of ``series`` columns; ``label(key)`` names it."""
    fig = figure(title, x_title, y_title)
    values = frame[x].dropna()
    if len(values) and values.min() > 0 and values.max() / values.min() >= 8:
        fig.update_xaxes(type="log", tickvals=sorted(values.unique()))
    groups = frame.groupby(list(series), sort=True, dropna=False) if series else [((), frame)]
    for key, group in groups:
        part = group.sort_values(x)
        fig.add_trace(go.Scatter(x=part[x].tolist(), y=part[y].tolist(), mode="lines+markers",
                                 name=label(key), error_y=mad_bars(part)))
    return fig


def metric_lines(rows: pd.DataFrame, specs: Sequence[tuple[str, str]], chart_id: Callable[[str], str],
                 x: str, series: str, **layout: Any) -> list[str]:
    """One :func:`lines` chart per measured ``(metric, title)`` of ``specs``, a line per value of
    ``series``; ``y_title(metric, unit)`` names the y axis."""
    y_title = layout.pop("y_title")
    charts = []
    for name, title in specs:
        part = rows[rows.metric == name]
        if not part.empty:
            fig = lines(part, x, "median", [series], title=title,
                        y_title=y_title(name, part.unit.iloc[0]), **layout)
            charts.append(chart(fig, chart_id(name)))
    return charts
