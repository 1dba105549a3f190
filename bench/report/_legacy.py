"""Turn benchmark result files into tables, chart specs and takeaways for the docs site.

Pure data code: no mkdocs here. ``docs/macros.py`` calls these functions and pastes the
returned Markdown/HTML into pages. Every figure comes from a result file read through
:func:`bench.results.load_file`; nothing is typed by hand.

Data flow: :func:`load` finds ``*.json`` under the results directory (skipping ``schema/``
and ``quick/``), validates each file with the reader (an unknown ``schema_version`` or a
missing field raises an error naming the file), and returns a :class:`Dataset`. Each
table or chart is drawn from ONE result file (the newest that holds the scenario) and
names it as its source.
"""

from __future__ import annotations

import html
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.results import ResultsError, load_file

SKIPPED_DIRS = frozenset({"schema", "quick"})
BENCH_COMMAND = "nox -s bench"
# A difference is reported only beyond this relative threshold AND with non-overlapping
# min..max ranges of the repetitions (see the methodology page).
THRESHOLD = 0.10
MISSING = "\N{EM DASH}"


class ReportError(ResultsError):
    """A result file cannot be rendered; the message names the file."""


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class Stat:
    """One metric of one result row: median, MAD, min, max and the raw repetitions."""

    median: float
    mad: float
    min: float
    max: float
    unit: str
    values: tuple[float, ...]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Stat:
        """Build from the ``metrics`` entry of a result row."""
        return cls(
            median=float(raw["median"]),
            mad=float(raw["mad"]),
            min=float(raw["min"]),
            max=float(raw["max"]),
            unit=str(raw["unit"]),
            values=tuple(float(v) for v in raw["values"]),
        )


@dataclass(frozen=True)
class Row:
    """One measured combination (scenario, server, config, params) of a result file."""

    scenario: str
    server: str
    config: str
    params: Mapping[str, Any]
    metrics: Mapping[str, Stat]
    extra: Mapping[str, Any]
    protocol: int = 3
    parser: str = "hiredis"
    exactly_once: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Row:
        """Build from one entry of a result file's ``results`` list."""
        return cls(
            scenario=raw["scenario"],
            server=raw["server"],
            config=raw["config"],
            params=dict(raw["params"]),
            metrics={k: Stat.from_json(v) for k, v in raw["metrics"].items()},
            extra=dict(raw.get("extra") or {}),
            protocol=int(raw.get("protocol", 3)),
            parser=str(raw.get("parser", "hiredis")),
            exactly_once=raw.get("exactly_once"),
        )

    def stat(self, name: str) -> Stat | None:
        """The metric called ``name``, or None when this row does not have it."""
        return self.metrics.get(name)

    def value(self, name: str) -> float | None:
        """Median of metric ``name``, or None."""
        found = self.metrics.get(name)
        return found.median if found else None

    def param(self, name: str) -> Any:
        """Parameter ``name`` (None when absent)."""
        return self.params.get(name)


@dataclass(frozen=True)
class RunFile:
    """One validated result file and where the site serves it."""

    rel: str  # path below the results directory, POSIX style; also its URL below results/
    doc: Mapping[str, Any]
    rows: tuple[Row, ...] = field(default=())

    @property
    def run_id(self) -> str:
        """The run id (sortable: it starts with the UTC time)."""
        return str(self.doc["run_id"])

    @property
    def created(self) -> str:
        """Creation time, UTC, ISO 8601."""
        return str(self.doc["created_utc"])

    @property
    def machine(self) -> str:
        """Human label of the machine: label, CPU model and core count."""
        env = self.doc["environment"]
        return f"{env['machine_label']} ({env['cpu_model']}, {env['cores']} cores)"

    @property
    def quick(self) -> bool:
        """True for a quick (smoke) run: one repetition, small sizes."""
        return bool(self.doc["method"]["quick"])

    @property
    def url(self) -> str:
        """Path of the raw JSON inside the site."""
        return f"results/{self.rel}"

    def scenario_rows(self, scenario: str, **where: Any) -> list[Row]:
        """Rows of ``scenario``; keyword filters match row attributes (server=, config=)."""
        return [
            r
            for r in self.rows
            if r.scenario == scenario and all(getattr(r, k) == v for k, v in where.items())
        ]

    def servers(self) -> list[Mapping[str, Any]]:
        """The ``servers`` entries: measured and not measured."""
        return list(self.doc["servers"])

    def failures(self) -> list[Mapping[str, Any]]:
        """Combinations that were attempted and failed (may be empty)."""
        return list(self.doc.get("failures") or [])


@dataclass(frozen=True)
class Dataset:
    """Every result file found, oldest first."""

    root: Path
    files: tuple[RunFile, ...]

    @property
    def empty(self) -> bool:
        """True when no result file exists yet."""
        return not self.files

    def latest(self, scenario: str | None = None) -> RunFile | None:
        """Newest file, or newest file holding rows of ``scenario``."""
        for run in reversed(self.files):
            if scenario is None or run.scenario_rows(scenario):
                return run
        return None


# --------------------------------------------------------------------------- loading


def result_paths(root: Path) -> list[Path]:
    """Result JSON files below ``root`` (sorted), skipping ``schema/`` and ``quick/``."""
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.rglob("*.json")):
        parts = path.relative_to(root).parts
        if not SKIPPED_DIRS.intersection(parts[:-1]):
            found.append(path)
    return found


def load_run(path: Path, root: Path) -> RunFile:
    """Validate one file with the reader and convert it; errors name the file."""
    doc = load_file(path)
    try:
        rows = tuple(Row.from_json(r) for r in doc["results"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path}: cannot read result rows: {exc!r}") from exc
    return RunFile(rel=path.relative_to(root).as_posix(), doc=doc, rows=rows)


def load(root: Path) -> Dataset:
    """Load every result file below ``root``; an empty or missing directory is fine."""
    runs = [load_run(p, root) for p in result_paths(root)]
    runs.sort(key=lambda r: (r.created, r.run_id))
    return Dataset(root=root, files=tuple(runs))


# --------------------------------------------------------------------------- formatting


def fmt(value: float | None) -> str:
    """Format a number for a table: thousands separators, about three significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    magnitude = abs(value)
    if magnitude >= 1000 or (value == int(value) and magnitude >= 100):
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return "0" if value == 0 else f"{value:.3g}"


def fmt_count(value: float | None) -> str:
    """A count: whole numbers without decimals, otherwise like :func:`fmt`."""
    if value is not None and value == round(value):
        return f"{round(value):,}"
    return fmt(value)


def fmt_stat(stat: Stat | None, spread: bool = True) -> str:
    """``median ± MAD`` (MAD omitted when zero or when ``spread`` is False)."""
    if stat is None:
        return MISSING
    if not spread or stat.mad == 0 or len(stat.values) < 2:
        return fmt(stat.median)
    return f"{fmt(stat.median)} ± {fmt(stat.mad)}"


def fmt_bytes(value: float | None) -> str:
    """Bytes with a binary unit (B, KiB, MiB, GiB)."""
    if value is None:
        return MISSING
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{fmt(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown pipe table; cells are str()-ed and pipes escaped."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def admonition(kind: str, title: str, body: str, marker: str = "!!!") -> str:
    """A Material admonition (``marker="???"``: collapsible) with ``body`` indented."""
    indented = "\n".join(("    " + line) if line else "" for line in body.splitlines())
    return f'{marker} {kind} "{title}"\n\n{indented}\n'


def no_data(what: str) -> str:
    """The note shown where a scenario has not been measured in any result file yet."""
    return admonition(
        "info",
        "No results yet",
        f"No result file under `results/` contains {what} yet. Make one with "
        f"`{BENCH_COMMAND}` (see [Methodology & reproduce](methodology.md)), "
        "then rebuild the site.",
    )


def source_line(run: RunFile, link_prefix: str = "") -> str:
    """``Source: run <id> (<date>, <machine>) · raw JSON`` with a link to the served file."""
    quick = " · **quick run** (one repetition, indicative only)" if run.quick else ""
    return (
        f"<small>Source: run `{run.run_id}` ({run.created}, {run.machine}), "
        f"Conveyor {run.doc['conveyor_version']}{quick} · "
        f"[raw JSON]({link_prefix}{run.url})</small>"
    )


# --------------------------------------------------------------------------- charts


@dataclass(frozen=True)
class Series:
    """One trace: a name, x values, y medians and optional MAD error bars."""

    name: str
    x: tuple[Any, ...]
    y: tuple[float, ...]
    error: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Chart:
    """A chart as data only; ``assets/charts.js`` draws it with plotly.js."""

    chart_id: str
    title: str
    x_title: str
    y_title: str
    series: tuple[Series, ...]
    kind: str = "line"  # "line" or "bar"
    x_type: str = "-"  # plotly axis type: "-", "linear", "log", "category"
    y_type: str = "-"


def _trace(series: Series, kind: str) -> dict[str, Any]:
    """A plotly trace dict for one series."""
    trace: dict[str, Any] = {
        "name": series.name,
        "x": list(series.x),
        "y": list(series.y),
        "type": "bar" if kind == "bar" else "scatter",
    }
    if kind != "bar":
        trace["mode"] = "lines+markers"
    if series.error and any(series.error):
        trace["error_y"] = {"type": "data", "array": list(series.error), "visible": True}
    return trace


def chart_spec(chart: Chart) -> dict[str, Any]:
    """Plotly ``data`` and ``layout`` for ``chart`` (theme colours are added in the browser)."""
    xaxis: dict[str, Any] = {"title": {"text": chart.x_title}, "type": chart.x_type}
    if chart.x_type == "category" or chart.kind == "bar":
        xaxis["type"] = "category"
    elif chart.x_type == "log":
        ticks = sorted({x for s in chart.series for x in s.x})
        xaxis.update(tickmode="array", tickvals=ticks, ticktext=[str(t) for t in ticks])
    layout = {
        "title": {"text": chart.title},
        "xaxis": xaxis,
        "yaxis": {"title": {"text": chart.y_title}, "type": chart.y_type, "rangemode": "tozero"},
        "barmode": "group",
    }
    return {"data": [_trace(s, chart.kind) for s in chart.series], "layout": layout}


def chart_html(chart: Chart) -> str:
    """A data-only ``<div>`` holding the spec as JSON (sorted keys: deterministic output)."""
    payload = json.dumps(chart_spec(chart), sort_keys=True, separators=(",", ":"))
    return (
        f'<div class="cv-chart" id="chart-{chart.chart_id}" '
        f'data-cv-chart="{html.escape(payload, quote=True)}"></div>'
    )


def chart_block(chart: Chart | None, run: RunFile, link_prefix: str = "") -> str:
    """The chart div followed by its source line, as a Markdown block."""
    if chart is None or not any(s.y for s in chart.series):
        return ""
    return f"{chart_html(chart)}\n\n{source_line(run, link_prefix)}\n"


# --------------------------------------------------------------------------- comparisons


def clearly_greater(a: Stat, b: Stat, threshold: float = THRESHOLD) -> bool:
    """True when ``a`` beats ``b`` beyond ``threshold`` and their ranges do not overlap."""
    if b.median <= 0:
        return a.median > 0 and a.min > b.max
    return a.median > b.median * (1 + threshold) and a.min > b.max


def within(a: Stat, b: Stat, share: float) -> bool:
    """True when ``a``'s median is at least ``share`` of ``b``'s median."""
    return b.median > 0 and a.median >= share * b.median


def group_by(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    """Group rows by ``key`` preserving first-seen order."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return groups


def sort_key(value: Any) -> tuple[int, Any]:
    """Sort numbers numerically before strings (for mixed parameter values)."""
    if isinstance(value, int | float):
        return (0, value)
    return (1, str(value))


# --------------------------------------------------------------------------- selection

SERVER_ORDER = ("valkey-9.1", "valkey-8.1", "redis-8.2", "redis-7.0", "dragonfly")


def server_rank(server: str) -> tuple[int, str]:
    """Order servers as the docs list them: newest Valkey first, Dragonfly last."""
    return (SERVER_ORDER.index(server), "") if server in SERVER_ORDER else (99, server)


def primary_server(run: RunFile, scenario: str) -> str | None:
    """The server whose rows a single-server table shows (first in SERVER_ORDER)."""
    servers = {r.server for r in run.scenario_rows(scenario)}
    return min(servers, key=server_rank) if servers else None


def base_rows(run: RunFile, scenario: str, server: str | None = None,
              config: str = "default") -> list[Row]:
    """Rows of ``scenario`` on ``server`` (primary by default) in ``config``.

    When several protocol/parser variants exist, only RESP3 with hiredis (or the most
    common variant) is kept so one table compares like with like.
    """
    server = server or primary_server(run, scenario)
    rows = run.scenario_rows(scenario, server=server, config=config)
    variants = group_by(rows, lambda r: (r.protocol, r.parser))
    if len(variants) <= 1:
        return rows
    return variants.get((3, "hiredis")) or max(variants.values(), key=len)


def pick_metric(rows: Sequence[Row], candidates: Sequence[str]) -> str | None:
    """The first candidate metric name that some row has."""
    for name in candidates:
        if any(name in r.metrics for r in rows):
            return name
    return None


def varying_params(rows: Sequence[Row]) -> list[str]:
    """Parameter names whose value differs between rows (in first-seen order)."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row.params))
    return [n for n in names if len({json.dumps(r.param(n), sort_keys=True) for r in rows}) > 1]


def metric_names(rows: Sequence[Row]) -> list[str]:
    """Every metric name in ``rows`` (first-seen order)."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row.metrics))
    return list(names)


def metric_header(name: str, rows: Sequence[Row]) -> str:
    """Column header of a metric: its name and unit."""
    unit = next((r.metrics[name].unit for r in rows if name in r.metrics), "")
    label = re.sub(r"^p(\d+)_(\d+)", r"p\1.\2", name)
    for suffix in ("_per_s", "_ms", "_bytes", "_s"):
        label = label.removesuffix(suffix)
    label = label.replace("_", " ")
    return f"{label} ({unit})" if unit else label


def param_label(name: str) -> str:
    """Column header of a parameter."""
    return name.replace("_bytes", " (B)").replace("_", " ")


# --------------------------------------------------------------------------- generic table


def scenario_table(rows: Sequence[Row], metrics: Sequence[str] | None = None,
                   columns: Sequence[str] = ()) -> str:
    """Table of rows: the given row attributes, varying params, then metric medians ± MAD."""
    params = varying_params(rows)
    metrics = list(metrics) if metrics is not None else metric_names(rows)
    headers = [c.replace("_", " ") for c in columns] + [param_label(p) for p in params]
    headers += [metric_header(m, rows) for m in metrics]
    ordered = sorted(rows, key=lambda r: tuple(sort_key(r.param(p)) for p in params))
    body = [
        [getattr(r, c) for c in columns]
        + [r.param(p) for p in params]
        + [fmt_stat(r.stat(m)) for m in metrics]
        for r in ordered
    ]
    return md_table(headers, body)


def series_by(rows: Sequence[Row], x_param: str, group_param: str | None, metric: str,
              label: Callable[[Any], str] = str) -> tuple[Series, ...]:
    """One series per value of ``group_param``: ``metric`` against ``x_param``."""
    groups = group_by(rows, lambda r: r.param(group_param) if group_param else metric)
    out = []
    for key in sorted(groups, key=sort_key):
        pts = sorted((r for r in groups[key] if metric in r.metrics),
                     key=lambda r: sort_key(r.param(x_param)))
        if pts:
            out.append(Series(
                name=label(key),
                x=tuple(r.param(x_param) for r in pts),
                y=tuple(r.metrics[metric].median for r in pts),
                error=tuple(r.metrics[metric].mad for r in pts),
            ))
    return tuple(out)


# --------------------------------------------------------------------------- sections
# Each section takes the dataset and the relative link prefix of the page, and returns
# Markdown. A section whose scenario is absent returns the "no results yet" note.

DEFAULT_CONFIGS = ("default", "external")


def default_config(run: RunFile, scenario: str, server: str) -> str:
    """The baseline configuration of ``server`` in ``run`` (``default``; ``external`` servers)."""
    configs = [r.config for r in run.scenario_rows(scenario, server=server)]
    for name in DEFAULT_CONFIGS:
        if name in configs:
            return name
    return configs[0] if configs else "default"


def baseline(run: RunFile, scenario: str, server: str | None = None) -> list[Row]:
    """Rows of ``scenario`` on ``server`` (primary by default) in its baseline config."""
    server = server or primary_server(run, scenario)
    if server is None:
        return []
    return base_rows(run, scenario, server, default_config(run, scenario, server))


def server_entry(run: RunFile, server: str) -> Mapping[str, Any]:
    """The ``servers`` entry for ``server`` (an empty mapping if absent)."""
    return next((s for s in run.servers() if s["id"] == server), {})


def server_label(run: RunFile, server: str) -> str:
    """``valkey-9.1 (9.1.2, libc malloc)``."""
    entry = server_entry(run, server)
    details = ", ".join(
        x for x in (entry.get("version"), entry.get("allocator") and f"{entry['allocator']} malloc")
        if x
    )
    return f"{server} ({details})" if details else server


def rows_caption(run: RunFile, rows: Sequence[Row]) -> str:
    """One line naming server, configuration, protocol and parser of ``rows``."""
    first = rows[0]
    varying = set(varying_params(rows))
    fixed = ", ".join(f"{param_label(k)} {v}" for k, v in sorted(first.params.items())
                      if k not in varying)
    return (
        f"Server {server_label(run, first.server)}, configuration `{first.config}`, "
        f"RESP{first.protocol}, {first.parser} parser" + (f"; {fixed}." if fixed else ".")
    )


def generic_section(ds: Dataset, scenario: str, prefix: str = "") -> str:
    """Every metric of ``scenario`` on the primary server, as one table with its source."""
    run = ds.latest(scenario)
    if run is None:
        return no_data(f"the `{scenario}` scenario")
    rows = baseline(run, scenario)
    return f"{rows_caption(run, rows)}\n\n{scenario_table(rows)}\n\n{source_line(run, prefix)}\n"


def quick_warning(run: RunFile | None) -> str:
    """A warning shown where figures come from a quick run."""
    if run is None or not run.quick:
        return ""
    return admonition(
        "warning",
        "Quick run",
        f"Run `{run.run_id}` is a quick run: one repetition and small sizes. Its figures show "
        "that the pipeline works; do not quote them. A full run (`nox -s bench`) replaces it.",
    )


def status(ds: Dataset) -> str:
    """Top-of-page note when there are no result files at all."""
    if not ds.empty:
        return ""
    return admonition(
        "warning",
        "No results yet",
        "This site renders every figure from result files under `results/`, and there are "
        "none yet. Make them with:\n\n```sh\nnox -s bench\n```\n\nthen rebuild the site with "
        "`nox -s docs`. See [Methodology & reproduce](methodology.md).",
    )



# --------------------------------------------------------------------------- reference

REFERENCE_MODES = (("c1", "one at a time"), ("cN", "{concurrency} concurrent"),
                   ("pipelined", "pipelines of {pipeline}"))
REFERENCE_COMMANDS = (("ping", "PING"), ("evalsha", "EVALSHA `return 1`"))


def _mode_label(mode: str, row: Row) -> str:
    """Column label of a reference mode, with its parameter filled in."""
    template = dict(REFERENCE_MODES)[mode]
    return template.format(concurrency=row.param("concurrency"), pipeline=row.param("pipeline"))


def reference_chart(row: Row) -> Chart:
    """Grouped bars: commands per second by mode, one series per command."""
    modes = [m for m, _ in REFERENCE_MODES]
    series = tuple(
        Series(
            name=label,
            x=tuple(_mode_label(m, row) for m in modes),
            y=tuple(row.value(f"{cmd}_{m}_ops_per_s") or 0.0 for m in modes),
            error=tuple((row.stat(f"{cmd}_{m}_ops_per_s") or _ZERO).mad for m in modes),
        )
        for cmd, label in REFERENCE_COMMANDS
    )
    return Chart("reference", "Client and server ceilings (no Conveyor)", "mode",
                 "commands per second", series, kind="bar")


def reference_section(ds: Dataset, prefix: str = "") -> str:
    """Ceilings table (PING and EVALSHA by mode, per variant) and chart of the baseline."""
    run = ds.latest("reference")
    if run is None:
        return no_data("the `reference` scenario")
    rows = [r for r in variant_rows(run, "reference") if r.config in DEFAULT_CONFIGS]
    base = rows[0]
    headers = ["variant", "command"] + [_mode_label(m, base) + " (ops/s)"
                                        for m, _ in REFERENCE_MODES]
    body = [
        [variant_label(row), label]
        + [fmt_stat(row.stat(f"{cmd}_{m}_ops_per_s")) for m, _ in REFERENCE_MODES]
        for row in rows
        for cmd, label in REFERENCE_COMMANDS
    ]
    return (f"{rows_caption(run, [base])}\n\n{md_table(headers, body)}\n\n"
            f"{chart_block(reference_chart(base), run, prefix)}")


_ZERO = Stat(0.0, 0.0, 0.0, 0.0, "", (0.0,))


# --------------------------------------------------------------------------- auto charts

X_PREFERENCE = ("concurrency", "payload_bytes", "batch", "pool_size", "count", "rate")
RATE_METRICS = ("lifecycles_per_s", "tasks_per_s", "jobs_per_s", "items_per_s", "ops_per_s")
PERCENTILES = ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms")


def choose_x(rows: Sequence[Row]) -> str | None:
    """The parameter to put on the x axis: preferred names first, then any varying one."""
    varying = varying_params(rows)
    for name in X_PREFERENCE:
        if name in varying:
            return name
    return varying[0] if varying else None


def group_label(row: Row, names: Sequence[str]) -> str:
    """Legend label from parameters: ``payload 64 B, batch 100``."""
    parts = []
    for name in names:
        value = row.param(name)
        parts.append(f"payload {value} B" if name == "payload_bytes" else f"{param_label(name)} "
                     f"{value}")
    return ", ".join(parts)


def auto_series(rows: Sequence[Row], metric: str, x: str) -> tuple[Series, ...]:
    """One series per combination of the other varying parameters."""
    others = [p for p in varying_params(rows) if p != x]
    groups = group_by(rows, lambda r: tuple(sort_key(r.param(p)) for p in others))
    out = []
    for key in sorted(groups):
        pts = sorted((r for r in groups[key] if metric in r.metrics),
                     key=lambda r: sort_key(r.param(x)))
        if pts:
            out.append(Series(
                name=group_label(pts[0], others) or metric_header(metric, pts),
                x=tuple(r.param(x) for r in pts),
                y=tuple(r.metrics[metric].median for r in pts),
                error=tuple(r.metrics[metric].mad for r in pts),
            ))
    return tuple(out)


def axis_type(values: Iterable[Any]) -> str:
    """``log`` for positive numbers spanning 8x or more, ``category`` for strings."""
    vals = list(values)
    if not all(isinstance(v, int | float) for v in vals):
        return "category"
    if vals and min(vals) > 0 and max(vals) / min(vals) >= 8:
        return "log"
    return "linear"


def auto_chart(chart_id: str, title: str, rows: Sequence[Row], metric: str) -> Chart | None:
    """A line chart of ``metric`` against the best x parameter, or None if nothing varies."""
    x = choose_x(rows)
    if x is None:
        return None
    series = auto_series(rows, metric, x)
    kind = "line" if axis_type(v for s in series for v in s.x) != "category" else "bar"
    return Chart(chart_id, title, param_label(x), metric_header(metric, rows), series,
                 kind=kind, x_type=axis_type(v for s in series for v in s.x))


def table_and_chart(ds: Dataset, scenario: str, prefix: str, metric_pref: Sequence[str],
                    title: str, *, shown: Sequence[str] | None = None) -> str:
    """Generic section: caption, table of every metric, one auto chart of the rate metric."""
    run = ds.latest(scenario)
    if run is None:
        return no_data(f"the `{scenario}` scenario")
    rows = baseline(run, scenario)
    metric = pick_metric(rows, metric_pref)
    chart = auto_chart(scenario, title, rows, metric) if metric else None
    body = f"{rows_caption(run, rows)}\n\n{scenario_table(rows, shown)}\n\n"
    return body + (chart_block(chart, run, prefix) or source_line(run, prefix) + "\n")


# --------------------------------------------------------------------------- performance


def variant_label(row: Row) -> str:
    """``baseline`` or what differs from it: ``aof-always``, ``RESP2``, ``python parser``."""
    parts = [row.config] if row.config not in DEFAULT_CONFIGS else []
    parts += [f"RESP{row.protocol}"] if row.protocol != 3 else []
    parts += [f"{row.parser} parser"] if row.parser != "hiredis" else []
    return ", ".join(parts) or "baseline"


def variant_rows(run: RunFile, scenario: str) -> list[Row]:
    """Rows of ``scenario`` on the primary server, one per variant, baseline first."""
    server = primary_server(run, scenario)
    rows = run.scenario_rows(scenario, server=server)
    return sorted(rows, key=variant_order)


CONFIG_ORDER = ("default", "external", "listpack-1024", "aof-everysec", "aof-always",
                "global-lock")


def config_rank(config: str) -> tuple[int, str]:
    """Order configurations: baseline, listpack, persistence, Dragonfly global lock, others."""
    return (CONFIG_ORDER.index(config) if config in CONFIG_ORDER else 99, config)


def variant_order(row: Row) -> tuple[tuple[int, str], int, int]:
    """Baseline first, then protocol, parser and configuration variants."""
    return (config_rank(row.config), row.protocol != 3, row.parser != "hiredis")


ENQUEUE = (("enqueue-single", "one per call"), ("enqueue-bulk", "enqueue_many"))


def enqueue_section(ds: Dataset, prefix: str = "") -> str:
    """Enqueue one job per call and in bulk, on every variant measured."""
    run = ds.latest("enqueue-bulk") or ds.latest("enqueue-single")
    if run is None:
        return no_data("the `enqueue-single` or `enqueue-bulk` scenario")
    parts, series = [], []
    for scenario, label in ENQUEUE:
        rows = variant_rows(run, scenario)
        if not rows:
            continue
        metrics = [m for m in ("jobs_per_s", "p50_ms", "p99_ms", "max_ms")
                   if any(m in r.metrics for r in rows)]
        body = [[variant_label(r)] + [fmt_stat(r.stat(m)) for m in metrics] for r in rows]
        table = md_table(["variant"] + [metric_header(m, rows) for m in metrics], body)
        parts.append(f"**{label}** ({rows_caption(run, rows[:1])[:-1]})\n\n{table}\n")
        series.append(Series(label, tuple(variant_label(r) for r in rows),
                             tuple(r.value("jobs_per_s") or 0.0 for r in rows),
                             tuple((r.stat("jobs_per_s") or _ZERO).mad for r in rows)))
    chart = Chart("enqueue", "enqueue throughput by variant", "variant", "jobs per second",
                  tuple(series), kind="bar")
    latency = "Latency columns are per call (per batch for `enqueue_many`)."
    return "\n".join(parts) + f"\n{latency}\n\n{chart_block(chart, run, prefix)}"


def variants_table(run: RunFile, scenario: str, metrics: Sequence[str]) -> str:
    """Every variant of ``scenario`` on the primary server at the params they share."""
    rows = variant_rows(run, scenario)
    others = [r for r in rows if variant_label(r) != "baseline"]
    if not others:
        return ""
    point = others[0].params
    same = [r for r in rows if r.params == point]
    shown = [m for m in metrics if any(m in r.metrics for r in same)]
    body = [[variant_label(r)] + [fmt_stat(r.stat(m)) for m in shown] for r in same]
    params = ", ".join(f"{param_label(k)} {v}" for k, v in sorted(point.items()))
    missing = ("" if any(variant_label(r) == "baseline" for r in same) else
               " This run has no baseline row at these parameters, so compare variants with "
               "each other only.")
    return (f"Variants, one dimension at a time ({params}).{missing}\n\n"
            + md_table(["variant"] + [metric_header(m, same) for m in shown], body) + "\n")


def process_section(ds: Dataset, prefix: str = "") -> str:
    """Draining a pre-filled queue with a burst worker, by concurrency and by variant."""
    section = table_and_chart(ds, "process", prefix, RATE_METRICS, "processing a backlog",
                              shown=["jobs_per_s"])
    run = ds.latest("process")
    return section + ("\n" + variants_table(run, "process", ("jobs_per_s",)) if run else "")


def lifecycle_section(ds: Dataset, prefix: str = "") -> str:
    """Lifecycle table (payload x concurrency) with throughput and p99 charts."""
    run = ds.latest("lifecycle")
    if run is None:
        return no_data("the `lifecycle` scenario")
    rows = baseline(run, "lifecycle")
    rate = pick_metric(rows, RATE_METRICS)
    shown = [m for m in (rate, *PERCENTILES) if m and any(m in r.metrics for r in rows)]
    charts = [auto_chart("lifecycle-rate", "lifecycle throughput", rows, rate) if rate else None]
    if any("p99_ms" in r.metrics for r in rows):
        charts.append(auto_chart("lifecycle-p99", "enqueue-to-ack p99", rows, "p99_ms"))
    blocks = "".join(chart_block(c, run, prefix) + "\n" for c in charts if c)
    variants = variants_table(run, "lifecycle", shown)
    return (f"{rows_caption(run, rows)}\n\n{scenario_table(rows, shown)}\n\n"
            f"{blocks or source_line(run, prefix)}\n\n{variants}")


def strings_first(value: Any) -> tuple[int, Any]:
    """Sort key putting labels such as ``unloaded`` before numbers."""
    kind, key = sort_key(value)
    return (1 - kind, key)


def load_label(row: Row) -> str:
    """``unloaded`` or ``open loop, 50% of capacity``."""
    load = row.param("load")
    if isinstance(load, int | float):
        return f"open loop, {pct(load)} of capacity"
    return str(load)


def latency_table(rows: Sequence[Row]) -> str:
    """load | percentiles | offered rate."""
    metrics = [m for m in (*PERCENTILES, "offered_per_s", "capacity_jobs_per_s")
               if any(m in r.metrics for r in rows)]
    body = [[load_label(r)] + [fmt_stat(r.stat(m)) for m in metrics] for r in rows]
    return md_table(["load"] + [metric_header(m, rows) for m in metrics], body)


def latency_section(ds: Dataset, prefix: str = "") -> str:
    """Enqueue-to-handler latency: unloaded and open loop at fractions of capacity."""
    run = ds.latest("latency")
    if run is None:
        return no_data("the `latency` scenario")
    rows = sorted(baseline(run, "latency"), key=lambda r: strings_first(r.param("load")))
    names = [p for p in PERCENTILES if any(p in r.metrics for r in rows)]
    series = tuple(
        Series(load_label(r),
               tuple(n.removesuffix("_ms").replace("_", ".") for n in names if n in r.metrics),
               tuple(r.metrics[n].median for n in names if n in r.metrics),
               tuple(r.metrics[n].mad for n in names if n in r.metrics))
        for r in rows
    )
    chart = Chart("latency", "enqueue-to-handler latency", "percentile", "latency (ms)", series,
                  kind="bar", y_type="log")
    caption = (f"Server {server_label(run, rows[0].server)}, worker concurrency "
               f"{rows[0].param('concurrency')}. Open-loop jobs are timed from their intended "
               "send time, so a producer falling behind is charged to latency.")
    variants = variants_table(run, "latency", PERCENTILES)
    return (f"{caption}\n\n{latency_table(rows)}\n\n{chart_block(chart, run, prefix)}\n"
            f"{variants}")


# --------------------------------------------------------------------------- takeaways

MOST_OF = 0.8  # "most of the throughput" means at least this share


def signed_pct(change: float) -> str:
    """-0.17 -> '-17%'; changes that round to zero print as '0%'."""
    text = f"{change * 100:+.0f}%"
    return "0%" if text in ("+0%", "-0%") else text


def pct(share: float) -> str:
    """0.873 -> '87%'."""
    return f"{share * 100:.0f}%"


def concurrency_takeaways(rows: Sequence[Row], rate: str) -> list[str]:
    """Per payload: the lowest concurrency giving most of the top throughput at a lower p99."""
    out = []
    for payload, group in sorted(group_by(rows, lambda r: r.param("payload_bytes")).items(),
                                 key=lambda kv: sort_key(kv[0])):
        ordered = sorted((r for r in group if r.stat(rate) and r.stat("p99_ms")),
                         key=lambda r: sort_key(r.param("concurrency")))
        if len(ordered) < 2:
            continue
        top = ordered[-1]
        for row in ordered[:-1]:
            rate_row, rate_top = row.stat(rate), top.stat(rate)
            p99_row, p99_top = row.stat("p99_ms"), top.stat("p99_ms")
            assert rate_row and rate_top and p99_row and p99_top
            if within(rate_row, rate_top, MOST_OF) and clearly_greater(p99_top, p99_row):
                out.append(
                    f"With {payload} B payloads, concurrency {row.param('concurrency')} gives "
                    f"{pct(rate_row.median / rate_top.median)} of the throughput of concurrency "
                    f"{top.param('concurrency')} at a p99 of {fmt(p99_row.median)} ms instead of "
                    f"{fmt(p99_top.median)} ms."
                )
                break
    return out


def payload_takeaways(rows: Sequence[Row], rate: str) -> list[str]:
    """Does the largest payload cost throughput beyond noise, at every concurrency measured?"""
    shares, pair = [], None
    for conc, group in sorted(group_by(rows, lambda r: r.param("concurrency")).items(),
                              key=lambda kv: sort_key(kv[0])):
        ordered = sorted((r for r in group if r.stat(rate)),
                         key=lambda r: sort_key(r.param("payload_bytes")))
        if len(ordered) < 2:
            continue
        small, large = ordered[0].stat(rate), ordered[-1].stat(rate)
        assert small and large
        if not clearly_greater(small, large):
            return []
        shares.append(f"{pct(large.median / small.median)} at concurrency {conc}")
        pair = (ordered[0].param("payload_bytes"), ordered[-1].param("payload_bytes"))
    if pair is None:
        return []
    return [f"{pair[1]} B payloads run at {', '.join(shares)} of the throughput of "
            f"{pair[0]} B payloads."]


def matching(a: Row, rows: Iterable[Row]) -> Row | None:
    """The row of ``rows`` with the same params as ``a``."""
    return next((r for r in rows if r.params == a.params), None)


def ratio_sentence(subject: str, better: Stat, worse: Stat, what: str) -> str | None:
    """``<subject> gives N.Nx the <what>`` when ``better`` clearly beats ``worse``."""
    if not clearly_greater(better, worse) or worse.median <= 0:
        return None
    return f"{subject} gives {better.median / worse.median:.1f}x the {what}."


def bulk_takeaway(run: RunFile) -> list[str]:
    """``enqueue_many`` against one-at-a-time enqueue, same payload."""
    single, bulk = baseline(run, "enqueue-single"), baseline(run, "enqueue-bulk")
    rate_s, rate_b = pick_metric(single, RATE_METRICS), pick_metric(bulk, RATE_METRICS)
    if not (single and bulk and rate_s and rate_b):
        return []
    best_s = max(single, key=lambda r: r.value(rate_s) or 0).stat(rate_s)
    best_b = max(bulk, key=lambda r: r.value(rate_b) or 0).stat(rate_b)
    assert best_s and best_b
    text = ratio_sentence("Enqueueing in bulk (`enqueue_many`)", best_b, best_s,
                          "best one-job-per-call enqueue rate")
    return [text] if text else []


def variant_takeaways(run: RunFile, scenario: str) -> list[str]:
    """Protocol and parser variants against the baseline, where measured."""
    base = baseline(run, scenario)
    rate = pick_metric(base, RATE_METRICS)
    if not base or rate is None:
        return []
    server, config = base[0].server, base[0].config
    others = [r for r in run.scenario_rows(scenario, server=server, config=config)
              if (r.protocol, r.parser) != (base[0].protocol, base[0].parser)]
    out = []
    for row in others:
        ref = matching(row, base)
        if ref is None or not (ref.stat(rate) and row.stat(rate)):
            continue
        name = f"RESP{row.protocol} with the {row.parser} parser"
        ref_name = f"RESP{ref.protocol} with {ref.parser}"
        s_row, s_ref = row.stat(rate), ref.stat(rate)
        assert s_row and s_ref
        text = (ratio_sentence(f"In `{scenario}`, {ref_name}", s_ref, s_row,
                               f"throughput of {name}")
                or ratio_sentence(f"In `{scenario}`, {name}", s_row, s_ref,
                                  f"throughput of {ref_name}"))
        if text:
            out.append(text)
    return sorted(set(out))


def performance_takeaways(ds: Dataset, prefix: str = "") -> str:
    """Bulleted takeaways computed from the newest relevant result files."""
    items: list[tuple[str, RunFile]] = []
    life = ds.latest("lifecycle")
    if life is not None:
        rows = baseline(life, "lifecycle")
        rate = pick_metric(rows, RATE_METRICS)
        if rate:
            found = concurrency_takeaways(rows, rate) + payload_takeaways(rows, rate)
            found += variant_takeaways(life, "lifecycle")
            items += [(t, life) for t in found]
    enq = ds.latest("enqueue-bulk")
    if enq is not None:
        items += [(t, enq) for t in bulk_takeaway(enq)]
    if not items:
        return ("No takeaway is supported by the current result files: no difference between "
                "the measured settings exceeds the noise threshold." if not ds.empty
                else no_data("the scenarios behind the takeaways"))
    runs = {r.run_id: r for _, r in items}
    lines = "\n".join(f"- {text}" for text, _ in items)
    sources = "\n\n".join(source_line(r, prefix) for r in runs.values())
    return f"{quick_warning(next(iter(runs.values())))}\n{lines}\n\n{sources}\n"


# --------------------------------------------------------------------------- servers

# (scenario, metric candidates, column label, higher is better)
SERVER_COLUMNS: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("lifecycle", RATE_METRICS, "lifecycle", True),
    ("process", RATE_METRICS, "process", True),
    ("enqueue-single", RATE_METRICS, "enqueue", True),
    ("enqueue-bulk", RATE_METRICS, "enqueue_many", True),
    ("latency", ("p99_ms",), "latency p99", False),
    ("memory", ("bytes_per_job",), "memory per job", False),
)


def servers_run(ds: Dataset) -> RunFile | None:
    """The newest run among those that measured the most servers."""
    best: RunFile | None = None
    for run in ds.files:
        count = sum(1 for s in run.servers() if s["measured"])
        if best is None or count >= sum(1 for s in best.servers() if s["measured"]):
            best = run
    return best


def common_point(run: RunFile, scenario: str, metric: str, higher: bool) -> Mapping[str, Any]:
    """Params measured on the most servers; ties go to the primary server's best value."""
    counts: dict[str, int] = {}
    for server in {r.server for r in run.scenario_rows(scenario)}:
        for row in baseline(run, scenario, server):
            key = json.dumps(row.params, sort_keys=True)
            counts[key] = counts.get(key, 0) + 1
    primary = {json.dumps(r.params, sort_keys=True): r.value(metric)
               for r in baseline(run, scenario)}

    def rank(key: str) -> tuple[int, float]:
        value = primary.get(key) or 0.0
        return (counts[key], value if higher else -value)

    return json.loads(max(sorted(counts), key=rank)) if counts else {}


@dataclass(frozen=True)
class Column:
    """One column of the servers table: a metric of a scenario at fixed params."""

    scenario: str
    metric: str
    point: Mapping[str, Any]
    header: str

    @property
    def label(self) -> str:
        """The header without its unit."""
        return self.header.split(" (")[0]

    def row(self, run: RunFile, server: str) -> Row | None:
        """The baseline row of ``server`` at this column's params."""
        return next((r for r in baseline(run, self.scenario, server) if r.params == self.point),
                    None)

    def value(self, run: RunFile, server: str | None = None) -> float | None:
        """Median of the metric on ``server`` (the primary server by default)."""
        row = self.row(run, server or primary_server(run, self.scenario) or "")
        return row.value(self.metric) if row else None


def server_cell(run: RunFile, col: Column, server: str) -> str:
    """Formatted value with its ratio to the reference server."""
    value, ref = col.value(run, server), col.value(run)
    if value is None:
        return MISSING
    primary = server == primary_server(run, col.scenario)
    return fmt(value) + ("" if primary or not ref else f" ({value / ref:.2f}x)")


def server_columns(run: RunFile) -> list[Column]:
    """Columns present in ``run``."""
    cols = []
    for scenario, candidates, label, higher in SERVER_COLUMNS:
        metric = pick_metric(run.scenario_rows(scenario), candidates)
        if metric:
            point = common_point(run, scenario, metric, higher)
            unit = metric_header(metric, run.scenario_rows(scenario)).rsplit("(", 1)[-1]
            cols.append(Column(scenario, metric, point, f"{label} ({unit}"))
    return cols


def not_measured(entry: Mapping[str, Any]) -> str:
    """Status cell of a server that was not measured: reason and command."""
    command = f"; measure with `{entry['command']}`" if entry.get("command") else ""
    return f"**not measured**: {entry.get('reason') or 'no reason recorded'}{command}"


def servers_table(run: RunFile, cols: Sequence[Column]) -> str:
    """One row per server of ``run``, measured or not."""
    body = []
    for entry in sorted(run.servers(), key=lambda e: server_rank(e["id"])):
        head = [entry["id"], entry.get("version") or MISSING, entry.get("allocator") or MISSING]
        if not entry["measured"]:
            body.append([*head, not_measured(entry)] + [MISSING] * len(cols))
        else:
            body.append([*head, "measured"] + [server_cell(run, c, entry["id"]) for c in cols])
    return md_table(["server", "version", "allocator", "status"] + [c.header for c in cols], body)


def servers_chart(run: RunFile, cols: Sequence[Column]) -> Chart | None:
    """Grouped bars: each throughput column relative to the reference server (= 1)."""
    measured = sorted((e["id"] for e in run.servers() if e["measured"]), key=server_rank)
    series = []
    for col in (c for c in cols if c.metric in RATE_METRICS):
        ref = col.value(run)
        values = [(s, col.value(run, s)) for s in measured] if ref else []
        pts = [(s, v) for s, v in values if v is not None]
        if ref and pts:
            series.append(Series(col.label, tuple(s for s, _ in pts),
                                 tuple(round(v / ref, 4) for _, v in pts)))
    if len(measured) < 2 or not series:
        return None
    ref_name = primary_server(run, cols[0].scenario) or measured[0]
    return Chart("servers", "throughput relative to the reference server", "server",
                 f"relative to {ref_name} (= 1)", tuple(series), kind="bar")


def point_caption(cols: Sequence[Column]) -> str:
    """Which parameters each column compares at."""
    parts = [f"{c.label}: " + ", ".join(f"{param_label(k)} {v}" for k, v in sorted(c.point.items()))
             for c in cols if c.point]
    return "Compared at: " + "; ".join(parts) + "." if parts else ""


def failures_note(run: RunFile) -> str:
    """List of failed cases in ``run``, if any."""
    fails = run.failures()
    if not fails:
        return ""
    body = "\n".join(f"- `{f['scenario']}` on {f['server']} / `{f['config']}`: {f['error']}"
                     for f in fails)
    return admonition("failure", "Cases that failed in this run (no figure recorded)", body)


def servers_section(ds: Dataset, prefix: str = "") -> str:
    """Side-by-side table and relative-throughput chart."""
    run = servers_run(ds)
    if run is None:
        return no_data("any server")
    cols = server_columns(run)
    chart = servers_chart(run, cols)
    return (f"{quick_warning(run)}\n{servers_table(run, cols)}\n\n"
            "Baseline configuration of each server, RESP3 with hiredis; in brackets, the ratio "
            f"to the first measured server. {point_caption(cols)}\n\n"
            f"{chart_block(chart, run, prefix) or source_line(run, prefix)}\n\n"
            f"{failures_note(run)}")


# --------------------------------------------------------------------------- tuning

LISTPACK_CONFIG = "listpack-1024"
MEMORY_METRICS = ("bytes_per_job",)
PERSISTENCE = (("default", "off"), ("aof-everysec", "appendfsync everysec"),
               ("aof-always", "appendfsync always"))
PERSISTENCE_SCENARIOS = ("enqueue-single", "enqueue-bulk", "process", "lifecycle")


def config_rows(run: RunFile, scenario: str, config: str) -> list[Row]:
    """Rows of ``scenario`` on the primary server in ``config``."""
    server = primary_server(run, scenario)
    return base_rows(run, scenario, server, config) if server else []


def memory_chart(rows: Sequence[Row], metric: str) -> Chart:
    """Bars: memory per job by payload, one series per configuration."""
    series = []
    for config, group in group_by(rows, lambda r: r.config).items():
        pts = sorted(group, key=lambda r: sort_key(r.param("payload_bytes")))
        series.append(Series(
            f"hash-max-listpack-value {'1024' if config == LISTPACK_CONFIG else '64 (default)'}",
            tuple(f"{r.param('payload_bytes')} B" for r in pts),
            tuple(r.metrics[metric].median for r in pts if metric in r.metrics),
            tuple(r.metrics[metric].mad for r in pts if metric in r.metrics),
        ))
    return Chart("memory", "memory per job by payload", "payload", "bytes per job",
                 tuple(series), kind="bar")


def memory_rows_table(base: Sequence[Row], tuned: Sequence[Row], metric: str) -> str:
    """payload | default | 1024 | change."""
    body = []
    for row in sorted(base, key=lambda r: sort_key(r.param("payload_bytes"))):
        other = matching(row, tuned)
        a, b = row.stat(metric), other.stat(metric) if other else None
        change = signed_pct(b.median / a.median - 1) if a and b and a.median else MISSING
        body.append([row.param("payload_bytes"), fmt_stat(a), fmt_stat(b), change])
    return md_table(["payload (B)", "default (B/job)", "1024 (B/job)", "change"], body)


def memory_advice(base: Sequence[Row], tuned: Sequence[Row], metric: str) -> str:
    """The recommendation, when the data shows a saving beyond noise."""
    saved = []
    for row in base:
        other = matching(row, tuned)
        a, b = row.stat(metric), other.stat(metric) if other else None
        if a and b and clearly_greater(a, b):
            saved.append(f"{row.param('payload_bytes')} B ({pct(1 - b.median / a.median)} less)")
    if not saved:
        return ("In this run no payload size shows a memory difference beyond noise between the "
                "two settings.")
    return ("**Recommendation:** with payloads up to 1 KiB, set `hash-max-listpack-value 1024`: "
            f"memory per job drops for payloads of {', '.join(saved)} (chart above).")


def memory_section(ds: Dataset, prefix: str = "") -> str:
    """Memory per job, default vs listpack-1024, by payload."""
    run = ds.latest("memory")
    if run is None:
        return no_data("the `memory` scenario")
    base = baseline(run, "memory")
    metric = pick_metric(base, MEMORY_METRICS)
    if metric is None:
        return generic_section(ds, "memory", prefix)
    tuned = config_rows(run, "memory", LISTPACK_CONFIG)
    chart = memory_chart([*base, *tuned], metric)
    return (f"{rows_caption(run, base)}\n\n{memory_rows_table(base, tuned, metric)}\n\n"
            f"{chart_block(chart, run, prefix)}\n{memory_advice(base, tuned, metric)}\n")


def persistence_rows(run: RunFile, only: str | None = None) -> tuple[str, list[tuple[str, Row]]] | None:
    """Scenario and (label, row) pairs comparable across the persistence configs."""
    for scenario in PERSISTENCE_SCENARIOS if only is None else (only,):
        base = baseline(run, scenario)
        for aof in (c for c, _ in PERSISTENCE[1:] if config_rows(run, scenario, c)):
            probe = config_rows(run, scenario, aof)[0]
            ref = matching(probe, base)
            if ref is None:
                continue
            pairs = []
            for config, label in PERSISTENCE:
                row = matching(probe, config_rows(run, scenario, config))
                if row is not None:
                    pairs.append((label, row))
            return scenario, pairs
    return None


def persistence_section(ds: Dataset, prefix: str = "") -> str:
    """Throughput with persistence off, AOF everysec and AOF always, one block per scenario."""
    run = next((r for r in reversed(ds.files) if persistence_rows(r)), None)
    if run is None:
        return no_data("a persistence comparison (configurations `aof-everysec`, `aof-always`)")
    found = (persistence_rows(run, scenario) for scenario in PERSISTENCE_SCENARIOS)
    return "\n".join(persistence_block(ds, run, f[0], f[1], prefix) for f in found if f)


def persistence_block(ds: Dataset, run: RunFile, scenario: str, pairs: list[tuple[str, Row]],
                      prefix: str) -> str:
    """Table, chart and measured advice for one scenario across the persistence configs."""
    rate = pick_metric([r for _, r in pairs], RATE_METRICS)
    if rate is None:
        return generic_section(ds, scenario, prefix)
    off = pairs[0][1].stat(rate)
    body = [[label, fmt_stat(r.stat(rate)),
             f"{(r.value(rate) or 0) / off.median:.2f}x" if off and off.median else MISSING]
            for label, r in pairs]
    chart = Chart(f"persistence-{scenario}", f"{scenario} throughput by persistence", "persistence",
                  metric_header(rate, [p[1] for p in pairs]),
                  (Series(scenario, tuple(lb for lb, _ in pairs),
                          tuple(r.value(rate) or 0.0 for _, r in pairs),
                          tuple((r.stat(rate) or _ZERO).mad for _, r in pairs)),), kind="bar")
    params = ", ".join(f"{param_label(k)} {v}" for k, v in sorted(pairs[0][1].params.items()))
    return (f"### `{scenario}`\n\nScenario `{scenario}` ({params}) on "
            f"{server_label(run, pairs[0][1].server)}.\n\n"
            f"{md_table(['persistence', metric_header(rate, [pairs[0][1]]), 'vs off'], body)}"
            f"\n\n{chart_block(chart, run, prefix)}\n{persistence_advice(pairs, rate)}\n")


def persistence_advice(pairs: Sequence[tuple[str, Row]], rate: str) -> str:
    """Which persistence modes cost throughput beyond noise."""
    off = pairs[0][1].stat(rate)
    lines = []
    for label, row in pairs[1:]:
        stat = row.stat(rate)
        if not (off and stat):
            continue
        if clearly_greater(off, stat):
            lines.append(f"- `{label}` costs throughput: {pct(stat.median / off.median)} of "
                         "persistence off.")
        else:
            lines.append(f"- `{label}` is within noise of persistence off.")
    advice = ("**Recommendation:** if the queue must survive a crash, enable AOF "
              "(`appendonly yes`) with `appendfsync everysec`; `always` calls fsync on every "
              "write. Measured here:")
    return advice + "\n\n" + "\n".join(lines) if lines else ""


MAINTENANCE_METRICS = ("items_per_s", "sweep_p99_ms", "probe_p99_ms")
MAINTENANCE_TABLE = ("items_per_s", "sweep_p50_ms", "sweep_p99_ms", "server_usec_per_sweep",
                     "probe_p50_ms", "probe_p99_ms", "probe_max_ms")


def maintenance_section(ds: Dataset, prefix: str = "") -> str:
    """Batch size against sweep throughput, time per sweep and the probe's p99."""
    run = ds.latest("maintenance")
    if run is None:
        return no_data("the `maintenance` scenario")
    rows = baseline(run, "maintenance")
    titles = {"items_per_s": "jobs promoted per second", "sweep_p99_ms": "time per sweep, p99",
              "probe_p99_ms": "PING p99 of another client during sweeps"}
    charts = [auto_chart(f"maintenance-{m.replace('_', '-')}", titles[m], rows, m)
              for m in MAINTENANCE_METRICS if any(m in r.metrics for r in rows)]
    blocks = "".join(chart_block(c, run, prefix) + "\n" for c in charts if c)
    shown = [m for m in MAINTENANCE_TABLE if any(m in r.metrics for r in rows)]
    return (f"{rows_caption(run, rows)}\n\n{scenario_table(rows, shown)}\n\n"
            f"{blocks or source_line(run, prefix)}\n{maintenance_advice(rows)}")


def maintenance_advice(rows: Sequence[Row]) -> str:
    """The batch-size tradeoff in numbers: smallest vs largest batch on the largest backlog."""
    backlog = max((r.param("backlog") for r in rows), key=sort_key, default=None)
    ordered = sorted((r for r in rows if r.param("backlog") == backlog),
                     key=lambda r: sort_key(r.param("batch")))
    if len(ordered) < 2:
        return ""
    small, large = ordered[0], ordered[-1]
    parts = []
    rate_s, rate_l = small.stat("items_per_s"), large.stat("items_per_s")
    if rate_s and rate_l and clearly_greater(rate_l, rate_s):
        parts.append(f"promotes {rate_l.median / rate_s.median:.1f}x faster")
    p99_s, p99_l = small.stat("probe_p99_ms"), large.stat("probe_p99_ms")
    if p99_s and p99_l and clearly_greater(p99_l, p99_s):
        parts.append(f"raises other clients' PING p99 from {fmt(p99_s.median)} to "
                     f"{fmt(p99_l.median)} ms")
    if not parts:
        return ("In this run the batch sizes measured differ by less than the noise threshold; "
                "the default is fine.\n")
    return (f"**Tradeoff measured here** (backlog {backlog}): batch {large.param('batch')} "
            f"{' but '.join(parts)}, compared with batch {small.param('batch')}. Keep the "
            "default unless promotion falls behind; raise it in steps while watching the "
            "probe p99 (charts above).\n")


def io_threads_note(ds: Dataset, prefix: str = "") -> str:
    """States the core counts behind the published results."""
    cores = sorted({int(r.doc["environment"]["cores"]) for r in ds.files})
    if not cores:
        return ""
    listed = ", ".join(str(c) for c in cores)
    verdict = ("so this site publishes no io-threads figures." if max(cores) < 4 else
               "io-threads figures would need a run that sets `io-threads`; none does yet.")
    return f"The result files on this site were measured on machines with {listed} cores, {verdict}"


DRAGONFLY = "dragonfly"
GLOBAL_LOCK = "global-lock"


def dragonfly_entry(ds: Dataset) -> tuple[RunFile, Mapping[str, Any]] | None:
    """Newest run that lists Dragonfly (measured or not) and its servers entry."""
    for run in reversed(ds.files):
        entry = server_entry(run, DRAGONFLY)
        if entry:
            return run, entry
    return None


def dragonfly_modes(run: RunFile) -> str:
    """Table: per scenario, hashtag-lock (default) vs global-lock throughput."""
    body = []
    for scenario in PERSISTENCE_SCENARIOS:
        base = base_rows(run, scenario, DRAGONFLY, "default")
        glob = base_rows(run, scenario, DRAGONFLY, GLOBAL_LOCK)
        rate = pick_metric(base, RATE_METRICS)
        for row in base if rate else []:
            other = matching(row, glob)
            a, b = row.stat(rate or ""), other.stat(rate or "") if other else None
            ratio = f"{b.median / a.median:.2f}x" if a and b and a.median else MISSING
            params = ", ".join(f"{param_label(k)} {v}" for k, v in sorted(row.params.items()))
            body.append([scenario, params, fmt_stat(a), fmt_stat(b), ratio])
    if not body:
        return ""
    return md_table(["scenario", "params", "--lock_on_hashtags (/s)",
                     "allow-undeclared-keys (/s)", "global vs hashtag"], body)


def dragonfly_section(ds: Dataset, prefix: str = "") -> str:
    """Measured hashtag vs global locking, or why Dragonfly was not measured."""
    found = dragonfly_entry(ds)
    if found is None:
        return no_data("Dragonfly")
    run, entry = found
    if not entry["measured"]:
        return admonition("info", "Dragonfly not measured",
                          f"{not_measured(entry)}.\n\n{source_line(run, prefix)}")
    table = dragonfly_modes(run)
    if not table:
        return generic_section(ds, "lifecycle", prefix)
    flags = {name: shlex.join(cfg.get("flags", [])) for name, cfg in entry["configs"].items()}
    flag_lines = "\n".join(f"- `{name}`: `{text}`" for name, text in sorted(flags.items()))
    return (f"Dragonfly {entry.get('version') or ''}; flags per configuration:\n\n{flag_lines}"
            f"\n\n{table}\n\n{source_line(run, prefix)}\n")


# --------------------------------------------------------------------------- methodology


def git_label(run: RunFile) -> str:
    """Short commit and a dirty marker."""
    git = run.doc["git"]
    commit = (git.get("commit") or "unknown")[:10]
    return f"`{commit}`" + (" (dirty)" if git.get("dirty") else "")


def runs_section(ds: Dataset, prefix: str = "") -> str:
    """Table of every result file, newest first, with download links."""
    if ds.empty:
        return no_data("any run")
    body = [
        [f"[`{r.run_id}`]({prefix}{r.url})", r.created, r.doc["conveyor_version"], git_label(r),
         r.doc["environment"]["machine_label"], r.doc["method"]["repetitions"],
         "quick" if r.quick else "full", len(r.rows)]
        for r in reversed(ds.files)
    ]
    return md_table(["run (raw JSON)", "created (UTC)", "Conveyor", "commit", "machine",
                     "repetitions", "kind", "result rows"], body)


def environment_table(run: RunFile) -> str:
    """Key/value table of where and how ``run`` was measured."""
    env, method, clients = run.doc["environment"], run.doc["method"], run.doc["clients"]
    pairs = [
        ("machine", env["machine_label"]), ("CPU", env["cpu_model"]), ("cores", env["cores"]),
        ("memory", fmt_bytes(env.get("memory_bytes"))), ("OS", f"{env['os']} {env['kernel']}"),
        ("Python", f"{env['implementation']} {env['python']}"),
        ("clients", ", ".join(f"{k} {v}" for k, v in sorted(clients.items()) if v)),
        ("git", git_label(run)),
        ("method", f"{method['repetitions']} repetitions, {method['warmup']} warm-up, "
                   f"process per repetition: {method['process_per_repetition']}"),
        ("statistics", method["statistics"]),
        ("command", f"`{shlex.join(run.doc['command'])}`"),
    ]
    return md_table(["field", "value"], pairs)


def servers_flags_table(run: RunFile) -> str:
    """Server, version, allocator and flags of every configuration in ``run``."""
    body = []
    for entry in sorted(run.servers(), key=lambda e: server_rank(e["id"])):
        if not entry["measured"]:
            body.append([entry["id"], MISSING, MISSING, not_measured(entry)])
            continue
        for name, cfg in sorted(entry["configs"].items(), key=lambda kv: config_rank(kv[0])):
            flags = shlex.join(cfg.get("flags", [])) or MISSING
            note = f" ({cfg['reason']})" if cfg.get("reason") else ""
            body.append([entry["id"], entry.get("version") or MISSING, name,
                         f"`{flags}`{note}" if cfg.get("flags") else flags + note])
    return md_table(["server", "version", "configuration", "flags"], body)


def environments_section(ds: Dataset, prefix: str = "") -> str:
    """One collapsible block per result file: environment and server flags."""
    if ds.empty:
        return no_data("any run")
    blocks = []
    for run in reversed(ds.files):
        body = (f"{environment_table(run)}\n\n{servers_flags_table(run)}\n\n"
                f"[Download the raw JSON]({prefix}{run.url})")
        blocks.append(admonition("abstract", f"Run {run.run_id} ({run.created})", body, "???"))
    return "\n".join(blocks)


def commands_section(ds: Dataset, prefix: str = "") -> str:
    """The exact command behind each result file."""
    if ds.empty:
        return ""
    lines = "\n".join(f"{shlex.join(r.doc['command'])}   # {r.run_id}" for r in reversed(ds.files))
    return f"The exact command of each result file on this site:\n\n```sh\n{lines}\n```\n"


# --------------------------------------------------------------------------- home


def with_unit(stat: Stat | None) -> str:
    """``1,552/s``, ``173 B``, ``0.93 ms``: a median with its unit."""
    if stat is None:
        return MISSING
    unit = {"1/s": "/s"}.get(stat.unit, f" {stat.unit}" if stat.unit else "")
    return f"{fmt_stat(stat)}{unit}"


def best_row(rows: Sequence[Row], metric: str, higher: bool = True) -> Row | None:
    """The row with the highest (or lowest) median of ``metric``."""
    having = [r for r in rows if metric in r.metrics]
    if not having:
        return None
    pick = max if higher else min
    return pick(having, key=lambda r: r.metrics[metric].median)


def params_text(row: Row) -> str:
    """``payload 64 B, concurrency 8``."""
    return group_label(row, [k for k in sorted(row.params) if k not in ("tasks", "jobs", "ops")])


# (label, scenario, metric candidates, highest?)
HEADLINES: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("Lifecycles per second (enqueue, claim, ack)", "lifecycle", RATE_METRICS, True),
    ("Jobs processed per second", "process", RATE_METRICS, True),
    ("Jobs enqueued per second, `enqueue_many`", "enqueue-bulk", RATE_METRICS, True),
    ("Memory per job", "memory", MEMORY_METRICS, False),
)


def headline(ds: Dataset, prefix: str = "") -> str:
    """Headline table: the best figure of each main scenario, with conditions and source."""
    body, runs = [], {}
    for label, scenario, candidates, higher in HEADLINES:
        run = ds.latest(scenario)
        rows = baseline(run, scenario) if run else []
        metric = pick_metric(rows, candidates)
        row = best_row(rows, metric, higher) if metric else None
        if run is None or row is None or metric is None:
            continue
        value = with_unit(row.stat(metric))
        value += f", p99 {fmt(row.value('p99_ms'))} ms" if row.stat("p99_ms") else ""
        body.append([label, value, f"{params_text(row)}; {server_label(run, row.server)}"])
        runs[run.run_id] = run
    if not body:
        return no_data("any of the headline scenarios")
    sources = "\n\n".join(source_line(r, prefix) for r in runs.values())
    warning = quick_warning(next(iter(runs.values())))
    return f"{warning}\n{md_table(['figure', 'median', 'conditions'], body)}\n\n{sources}\n"


# --------------------------------------------------------------------------- connections

ROLES = ("pump", "waiter", "maint", "other")
HEADROOM = 0.25  # suggested spare share on top of the computed total for maxclients
RESERVED = 10  # suggested connections kept for admin tools and monitoring


@dataclass(frozen=True)
class RoleFit:
    """Connections of one role per worker process: ``base + per_concurrency * concurrency``."""

    role: str
    base: float
    per_concurrency: float


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope; a single point gives slope 0."""
    xs = [p[0] for p in points]
    if len(set(xs)) < 2:
        return (sum(p[1] for p in points) / len(points), 0.0)
    n, mx = len(points), sum(xs) / len(points)
    my = sum(p[1] for p in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return (my - slope * mx, slope)


def connections_rows(ds: Dataset, kind: str) -> tuple[RunFile, list[Row]] | None:
    """Newest run with ``connections`` rows of ``kind`` (roles, pool, too-small)."""
    for run in reversed(ds.files):
        rows = [r for r in baseline(run, "connections") if r.param("kind") == kind]
        if rows:
            return run, rows
    return None


def role_metric(role: str) -> str:
    """Metric holding the connection count of ``role``."""
    return f"connections_{role}"


def role_fits(rows: Sequence[Row]) -> list[RoleFit]:
    """Fit each role's connection count against worker concurrency."""
    fits = []
    for role in ROLES:
        pts = [(float(r.param("concurrency") or 0), r.metrics[role_metric(role)].median)
               for r in rows if role_metric(role) in r.metrics]
        if pts:
            base, slope = fit_line(pts)
            fits.append(RoleFit(role, round(base, 3), round(slope, 4)))
    return fits


def bytes_per_connection(rows: Sequence[Row]) -> Stat | None:
    """Measured server memory per connection, if the run has it."""
    name = pick_metric(rows, ("bytes_per_connection",))
    return next((r.metrics[name] for r in rows if name and name in r.metrics), None)


def connections_roles(ds: Dataset, prefix: str = "") -> str:
    """Connections per worker process by role, as measured with ``CLIENT LIST``."""
    found = connections_rows(ds, "roles")
    if found is None:
        return no_data("the `connections` scenario")
    run, rows = found
    names = [m for m in (*map(role_metric, ROLES), "connections_total")
             if any(m in r.metrics for r in rows)]
    body = [[r.param("concurrency")] + [fmt_count(r.value(m)) for m in names] for r in rows]
    headers = ["worker concurrency"] + [m.removeprefix("connections_") for m in names]
    note = ("`other` counts unnamed connections: the queue's command pool. "
            if "connections_other" in names else "")
    concs = sorted({r.param("concurrency") for r in rows}, key=sort_key)
    single = (f"Measured at worker concurrency {concs[0]} only: whether a role grows with "
              "concurrency is not measured yet. " if len(concs) == 1 else "")
    return (f"{rows_caption(run, rows)}\n\n{md_table(headers, body)}\n\n{note}{single}\n\n"
            f"{source_line(run, prefix)}\n")


def formula_text(fits: Sequence[RoleFit]) -> str:
    """The per-process formula from the fitted roles."""

    def term(fit: RoleFit) -> str:
        slope = f" + {fmt(fit.per_concurrency)} x concurrency" if fit.per_concurrency else ""
        return f"{fit.role} {fmt_count(fit.base)}{slope}"

    return " + ".join(term(f) for f in fits)


def single_concurrency_note(rows: Sequence[Row]) -> str:
    """`` at worker concurrency 32 (the only one measured)`` when the fit has one point."""
    concs = {r.param("concurrency") for r in rows}
    if len(concs) != 1:
        return ""
    return f" at worker concurrency {next(iter(concs))} (the only concurrency measured)"


def sizing_formula(ds: Dataset, prefix: str = "") -> str:
    """Formula for pool size and maxclients, with the measured per-role terms."""
    found = connections_rows(ds, "roles")
    fits = role_fits(found[1]) if found else []
    scope = single_concurrency_note(found[1]) if found else ""
    measured = (f"Measured per worker process: **{formula_text(fits)}** connections{scope}.\n\n"
                f"{source_line(found[0], prefix)}\n\n" if found and fits else
                no_data("per-role connection counts") + "\n")
    return (
        measured
        + "Across a deployment:\n\n"
        "```text\n"
        "connections = worker_processes x per_worker_process + producer_processes x pool_size\n"
        f"maxclients >= connections x {1 + HEADROOM:g} + {RESERVED}"
        "   (spare for restarts, deploys and admin tools)\n"
        "```\n\n"
        "During a rolling deploy old and new processes overlap: count both generations. The "
        "server default `maxclients` is 10000 (Dragonfly: 64000); check it with "
        "`CONFIG GET maxclients`.\n"
    )


def pool_section(ds: Dataset, prefix: str = "") -> str:
    """Producer throughput against the queue's pool size."""
    found = connections_rows(ds, "pool")
    if found is None:
        return no_data("a pool-size sweep (`connections` scenario)")
    run, rows = found
    metric = pick_metric(rows, RATE_METRICS) or "jobs_per_s"
    chart = auto_chart("pool-size", "producer throughput by pool size", rows, metric)
    text = (f"{rows_caption(run, rows)} Producers enqueue one job per call through one "
            "`AsyncQueue`; the pool bounds how many calls are in flight.")
    return (f"{text}\n\n{scenario_table(rows, [metric])}\n\n"
            f"{chart_block(chart, run, prefix) or source_line(run, prefix)}\n")


def exhaustion_record(ds: Dataset, prefix: str) -> str:
    """The error a too-small pool produced in the benchmark, if recorded."""
    found = connections_rows(ds, "too-small")
    if found is None:
        return ""
    run, rows = found
    row = rows[0]
    kind, message = row.extra.get("exception_type"), row.extra.get("exception_message")
    failed = fmt_count(row.value("failed_calls"))
    params = ", ".join(f"{param_label(k)} {v}" for k, v in sorted(row.params.items()))
    seen = f"```text\n{kind}: {message}\n```\n\n" if kind else "No call failed.\n\n"
    return (f"Measured ({params}): {failed} calls failed; the first error was:\n\n{seen}"
            f"{source_line(run, prefix)}\n\n")


def exhaustion_section(ds: Dataset, prefix: str = "") -> str:
    """What a too-small pool looks like (recorded error when measured) and the fix."""
    return (
        exhaustion_record(ds, prefix)
        + "A queue opened with `Queue.from_url` / `AsyncQueue.from_url` holds a bounded pool of "
        "`QueueSettings.pool_size` connections. When every connection stays busy for "
        "`pool_timeout` seconds, the call raises `conveyor.PoolExhaustedError` (a "
        "`ConnectionFailedError`), whose message names the server and the fix. On the server "
        "side, past `maxclients` new connections get `ERR max number of clients reached`.\n\n"
        "**Fix:** give each producer a `pool_size` at least equal to the number of calls it "
        "makes at once (the chart above shows what a smaller pool costs), and size "
        "`maxclients` with the formula. `CLIENT LIST` groups connections by name "
        "(`conveyor:<queue>:<role>`) to find the process that holds too many.\n"
    )


def _input(name: str, label: str, value: Any, note: str = "") -> str:
    """One labelled numeric input of the calculator."""
    shown = "" if value is None else html.escape(str(value))
    hint = f' <small class="cv-calc-note">{note}</small>' if note else ""
    return (f'<label>{label} <input name="{name}" type="number" min="0" step="any" '
            f'value="{shown}"></label>{hint}')


def calculator(ds: Dataset, prefix: str = "") -> str:
    """The offline calculator: measured roles and memory per connection, else inputs."""
    found = connections_rows(ds, "roles")
    fits = role_fits(found[1]) if found else []
    per_conn = bytes_per_connection(found[1]) if found else None
    spec = {"roles": [vars(f) for f in fits], "headroom": HEADROOM, "reserved": RESERVED}
    src = f"measured in run {found[0].run_id}" if found else ""
    mem_note = (f"measured: {fmt(per_conn.median)} B ({src})" if per_conn else
                "not measured yet: an input, enter your server's figure")
    inputs = [
        _input("workers", "Worker processes", 4),
        _input("concurrency", "Concurrency per worker", 8),
        _input("producers", "Producer processes (enqueue only)", 2),
        _input("producer_pool", "Pool size per producer (its QueueSettings.pool_size)", 4),
        _input("bytes_per_connection", "Server memory per connection (bytes)",
               per_conn.median if per_conn else None, mem_note),
    ]
    if not fits:
        inputs.insert(2, _input("per_worker_input", "Connections per worker process", None,
                                "not measured yet: an input"))
    outputs = [("per_worker", "Connections per worker process"),
               ("total", "Connections in total"),
               ("maxclients", f"Suggested maxclients (x{1 + HEADROOM:g} + {RESERVED})"),
               ("memory", "Server memory for these connections")]
    rows = "".join(f'<tr><td>{label}</td><td data-out="{key}"></td></tr>' for key, label in outputs)
    payload = html.escape(json.dumps(spec, sort_keys=True), quote=True)
    scope = single_concurrency_note(found[1]) if found else ""
    formula = (f"<p>Per worker process: {formula_text(fits)}{scope} ({src}).</p>" if fits else "")
    return (f'<div class="cv-calc" id="calc-connections" data-cv-calc="{payload}">{formula}'
            f'<form>{"".join(inputs)}</form><table><tbody>{rows}</tbody></table></div>\n')


# --------------------------------------------------------------------------- registry


def status_section(ds: Dataset, prefix: str = "") -> str:
    """Macro form of :func:`status`."""
    return status(ds)


def ceiling_rows(run: RunFile) -> list[list[Any]]:
    """Per server: processing rate at the reference concurrency next to the EVALSHA ceiling."""
    body = []
    for ref in run.scenario_rows("reference"):
        if (ref.protocol, ref.parser) != (3, "hiredis") or ref.config != "default":
            continue
        conc, ceiling = ref.param("concurrency"), ref.value("evalsha_cN_ops_per_s")
        match = [r for r in run.scenario_rows("process", server=ref.server, config=ref.config)
                 if r.param("concurrency") == conc and (r.protocol, r.parser) == (3, "hiredis")]
        rate = match[0].value("jobs_per_s") if match else None
        if ceiling and rate:
            body.append([server_label(run, ref.server), conc, fmt(rate), fmt(ceiling),
                         f"{rate / ceiling:.2f}x"])
    return body


def ceiling_section(ds: Dataset, prefix: str = "") -> str:
    """Jobs/s as a multiple of what one-call-per-job could reach at all (same run, same server)."""
    run = ds.latest("process")
    body = ceiling_rows(run) if run else []
    if run is None or not body:
        return no_data("process and reference rows at the same concurrency in one run")
    headers = ["server", "concurrency", "jobs/s (process)", "EVALSHA calls/s (reference)",
               "jobs per call-ceiling"]
    return f"{md_table(headers, body)}\n\n{source_line(run, prefix)}\n"


SECTIONS: dict[str, Callable[[Dataset, str], str]] = {
    "ceiling_section": ceiling_section,
    "results_status": status_section,
    "headline": headline,
    "reference_section": reference_section,
    "enqueue_section": enqueue_section,
    "process_section": process_section,
    "lifecycle_section": lifecycle_section,
    "latency_section": latency_section,
    "performance_takeaways": performance_takeaways,
    "servers_section": servers_section,
    "memory_section": memory_section,
    "persistence_section": persistence_section,
    "maintenance_section": maintenance_section,
    "io_threads_note": io_threads_note,
    "dragonfly_section": dragonfly_section,
    "connections_roles": connections_roles,
    "sizing_formula": sizing_formula,
    "pool_section": pool_section,
    "exhaustion_section": exhaustion_section,
    "calculator": calculator,
    "runs_section": runs_section,
    "environments_section": environments_section,
    "commands_section": commands_section,
}
