"""Performance page, first half: reference ceilings, enqueue, process and the call ceiling."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from bench.report.common import (
    primary_run,
    primary_server,
    run_rows,
    scenario_section,
    server_label,
    source,
    stat_cell,
    variant,
    wide,
)
from bench.report.compare import BASELINE, ratio, select
from bench.report.figures import bar, chart, figure, lines
from bench.report.load import Dataset
from bench.report.text import admonition, fmt, md_table, no_data, params_text, span, times

COMMANDS = {"ping": "PING", "evalsha": "EVALSHA of return 1"}
LATENCY = ["p50_ms", "p99_ms"]


@scenario_section("reference", **BASELINE)
def reference_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """PING and EVALSHA per second, one at a time, concurrent and pipelined."""
    parts = rows.metric.str.extract(r"^(ping|evalsha)_(c1|cN|pipelined)_ops_per_s$")
    first = rows.iloc[0]
    modes = {"c1": "1 call at a time", "cN": f"{first.concurrency} concurrent callers",
             "pipelined": f"pipelines of {first.pipeline}"}
    rows = rows.assign(command=parts[0].map(COMMANDS), mode=parts[1].map(modes)).dropna(
        subset=["command"])
    table = wide(ds, rows.assign(metric=rows["mode"], unit="calls/s"), ["command"],
                 list(modes.values()))
    fig = figure("Client and server ceilings, no Conveyor", "how calls are made", "calls/s",
                 category_x=True)
    for command, group in rows.groupby("command", sort=False):
        part = group.set_index("mode").loc[list(modes.values())].reset_index()
        fig.add_trace(bar(part["mode"], part, command))
    return (f"On {server_label(ds, run, first.server)}, RESP3, hiredis; calls per second.\n\n"
            f"{md_table(table)}\n\n{chart(fig, 'reference')}")


def _variants(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a ``variant`` column, the baseline first."""
    labels = [variant(r) for _, r in rows.iterrows()]
    order = sorted(set(labels), key=lambda v: (v != "baseline", v))
    return rows.assign(variant=pd.Categorical(labels, categories=order, ordered=True))


def _enqueue_chart(rows: pd.DataFrame, chart_id: str, title: str, series: str | None) -> str:
    fig = figure(title, "variant (one thing changed from the baseline)", "jobs/s", category_x=True)
    rates = rows[rows.metric == "jobs_per_s"]
    groups = rates.groupby(series, sort=True, observed=True) if series else [(None, rates)]
    for key, part in groups:
        name = f"{key} producer{'s' if key != 1 else ''}" if series else "1 producer"
        fig.add_trace(bar(part["variant"].astype(str), part, name))
    return chart(fig, chart_id)


def enqueue_section(ds: Dataset, prefix: str = "") -> str:
    """One job per call and ``enqueue_many``: separate tables and charts, labelled by producers."""
    out, run = [], None
    for scenario, title, by in (("enqueue-single", "One job per call (`enqueue`)", []),
                                ("enqueue-bulk", "In batches (`enqueue_many`)", ["producers"])):
        found = run_rows(ds, scenario)
        if found is None or found[1].empty:
            continue
        run, rows = found
        if by:  # files from before the producers parameter measured one producer
            rows = rows.assign(producers=rows.get("producers", pd.Series(1, rows.index)).fillna(1))
        rows = _variants(rows)
        table = wide(ds, rows, ["variant", *by], ["jobs_per_s", *LATENCY], once=True)
        first = ds.cases[(ds.cases.run_id == run) & (ds.cases.scenario == scenario)].iloc[0]
        fixed = params_text(first.params, skip=("producers", "jobs"))
        unit = "per call" if scenario == "enqueue-single" else "per batch"
        out.append(f"### {title}\n\n{server_label(ds, run, rows.iloc[0].server)}, {fixed}; "
                   f"latency {unit}.\n\n{md_table(table)}\n\n"
                   + _enqueue_chart(rows, scenario, f"{title.split(' (')[0]}: jobs/s by variant",
                                    by[0] if by else None))
    if run is None:
        return no_data("the `enqueue-single` or `enqueue-bulk` scenario")
    return "\n\n".join(out) + f"\n\n{source(ds, run, prefix)}\n"


@scenario_section("process")
def process_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """A burst worker draining a pre-filled queue: by concurrency, then by variant."""
    base = select(rows, **BASELINE)
    metrics = [m for m in ("jobs_per_s", "elapsed_s") if m in set(base.metric)]
    table = wide(ds, base, ["concurrency"], metrics, once=True)
    fig = lines(base[base.metric == "jobs_per_s"], "concurrency", "median", [],
                title="Draining a backlog: jobs/s by worker concurrency",
                x_title="worker concurrency (handlers at once)", y_title="jobs/s",
                label=lambda _: "baseline, payload " + str(base.iloc[0].payload_bytes) + " B")
    others = _variants(rows[rows.metric == "jobs_per_s"])
    point = others[others.variant != "baseline"]
    text = ""
    if not point.empty:
        same = others[others.case == point.iloc[0].case]
        var = wide(ds, same, ["variant"], ["jobs_per_s"])
        text = (f"\n\nOne thing changed at a time, at concurrency {point.iloc[0].concurrency}:"
                f"\n\n{md_table(var)}")
    first = base.iloc[0]
    return (f"{server_label(ds, run, first.server)}, RESP3, hiredis, jobs of "
            f"{first.payload_bytes} B.\n\n{md_table(table)}\n\n{chart(fig, 'process')}{text}")


def ceiling_section(ds: Dataset, prefix: str = "") -> str:
    """Jobs/s against the EVALSHA calls/s of the same server at the same concurrency."""
    run = primary_run(ds, "process")
    if run is None:
        return no_data("process and reference rows at the same concurrency in one run")
    ref = select(ds.summary, run_id=run, scenario="reference", metric="evalsha_cN_ops_per_s",
                 **BASELINE)
    proc = select(ds.summary, run_id=run, scenario="process", metric="jobs_per_s", **BASELINE)
    both = proc.merge(ref, on=["server", "concurrency"], suffixes=("", "_ref"))
    if both.empty:
        return no_data("process and reference rows at the same concurrency in one run")
    table = pd.DataFrame({
        "server": both.server, "concurrency": both.concurrency,
        "jobs/s (process)": both["median"].map(fmt),
        "EVALSHA calls/s": both["median_ref"].map(fmt),
        "jobs per call ceiling": (both["median"] / both["median_ref"]).map(times),
    })
    return f"{md_table(table)}\n\n{source(ds, run, prefix)}\n"


CPU_METRIC = "client_cpu_us_per_job"
CPU_SCENARIOS = (("enqueue-single", "`enqueue`, one job per call", ("callers", "batching")),
                 ("enqueue-bulk", "`enqueue_many`", ("batch", "producers")),
                 ("process", "AsyncWorker draining a backlog", ("concurrency",)))
CPU_NOT_MEASURED = admonition(
    "info", "Not measured yet",
    f"No result file under `results/` records the client CPU per job (`{CPU_METRIC}`, of "
    "`enqueue-single`, `enqueue-bulk` and `process`) yet: the committed runs predate it. The "
    "next run of `nox -s bench` records it; then rebuild the site.")


def _case_label(row: pd.Series, keys: tuple[str, ...]) -> str:
    """``callers 1, batching off`` from the row's params."""
    parts = []
    for key in keys:
        value = row.get(key)
        if value is None or (isinstance(value, float) and pd.isna(value)):
            continue
        shown = ("on" if value else "off") if isinstance(value, bool) else fmt(value)
        parts.append(f"{key} {shown}")
    return ", ".join(parts) or "default"


def client_cpu_section(ds: Dataset, prefix: str = "") -> str:
    """CPU time of the producer or worker process per job, beside the rate of the same case."""
    have = ds.summary[ds.summary.metric == CPU_METRIC]
    table, runs = [], []
    for scenario, title, keys in CPU_SCENARIOS:
        run = primary_run(replace(ds, summary=have), scenario)
        if run is None:
            continue
        server = primary_server(ds, run, scenario)
        rows = select(ds.summary, run_id=run, scenario=scenario, server=server, **BASELINE)
        rates = rows[rows.metric == "jobs_per_s"].set_index("case")
        for _, row in rows[rows.metric == CPU_METRIC].iterrows():
            rate = rates.loc[row.case] if row.case in rates.index else None
            table.append({"scenario": title, "case": _case_label(row, keys), "server": server,
                          "client CPU per job (µs)": stat_cell(row),
                          "jobs/s": stat_cell(rate),
                          "jobs/s one client core could sustain": fmt(1e6 / row["median"])})
        runs.append(run)
    if not table:
        return CPU_NOT_MEASURED
    sources = "\n\n".join(source(ds, run, prefix) for run in dict.fromkeys(runs))
    return (f"Process CPU time (user + system, every thread) from the start to the end of the "
            f"timed part, over the jobs done in it; RESP3, hiredis, default configuration.\n\n"
            f"{md_table(pd.DataFrame(table))}\n\n{sources}\n")


def _feature_row(ds: Dataset, run: str, on: pd.Series) -> dict[str, str] | None:
    off = select(ds.summary, run_id=run, scenario="process", server=on.server, metric="jobs_per_s",
                 concurrency=on.concurrency, payload_bytes=on.payload_bytes, **BASELINE)
    if off.empty:
        return None
    r = ratio(on, off.iloc[0])
    verdict = "within noise" if r["noise"] else f"{span(float(r['lo']), float(r['hi']))} whiskers"
    return {"features on": str(on.features), "concurrency": str(on.concurrency),
            "jobs/s, none used": stat_cell(off.iloc[0]), "jobs/s, features on": stat_cell(on),
            "ratio": f"{times(float(r['ratio']))} ({verdict})"}


def features_section(ds: Dataset, prefix: str = "") -> str:
    """``process`` with priorities, a limit key and hooks on, against the same run's baseline."""
    run = primary_run(ds, "process")
    server = primary_server(ds, run, "process") if run else None
    on = select(ds.featured, run_id=run, scenario="process", server=server, metric="jobs_per_s",
                **BASELINE) if run and "features" in ds.featured.columns else ds.featured.iloc[0:0]
    rows = [row for _, r in on.iterrows() if (row := _feature_row(ds, str(run), r))]
    if not rows:
        return no_data("the `process` case with priorities, a limit key and hooks on")
    return (f"{server_label(ds, str(run), str(server))}, RESP3, hiredis, same run, same "
            f"concurrency; jobs alternate between priority levels 0 and 5, all carry one limit key "
            f"whose limit is never reached, and a `before` and an `after` hook wrap each task call."
            f"\n\n{md_table(pd.DataFrame(rows))}\n\n{source(ds, str(run), prefix)}\n")


SECTIONS = {"reference_section": reference_section, "enqueue_section": enqueue_section,
            "process_section": process_section, "ceiling_section": ceiling_section,
            "client_cpu_section": client_cpu_section,
            "features_section": features_section}
