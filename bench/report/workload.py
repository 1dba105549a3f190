"""Performance page, second half: lifecycles and enqueue-to-handler latency."""

from __future__ import annotations

import pandas as pd

from bench.report.common import scenario_section, server_label, wide
from bench.report.compare import BASELINE
from bench.report.figures import chart, metric_lines, plot
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, metric_label, pct

PERCENTILES = ["p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms"]
FEW_SAMPLES = 1000  # below this, a p99.9 is the largest sample or next to it


@scenario_section("lifecycle", **BASELINE)
def lifecycle_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Throughput and latency of enqueue-claim-ack by payload and concurrency."""
    shown = [m for m in ("lifecycles_per_s", "p50_ms", "p99_ms") if m in set(rows.metric)]
    table = wide(ds, rows, ["payload_bytes", "concurrency"], shown, once=True)
    charts = metric_lines(rows, (("lifecycles_per_s", "Lifecycles per second by concurrency"),
                                 ("p99_ms", "Enqueue-to-ack p99 by concurrency")),
                          lambda name: f"lifecycle-{name.replace('_', '-')}", metric_label, x="concurrency",
                          series="payload_bytes", x_title="concurrent tasks",
                          name=lambda key: f"payload {key} B")
    first = rows.iloc[0]
    return (f"{server_label(ds, run, first.server)}, RESP3, hiredis; latency per lifecycle."
            f"\n\n{md_table(table)}\n\n" + "\n\n".join(charts))


def load_label(load: object) -> str:
    """``unloaded``, ``partly busy`` or ``50% of capacity`` (open loop)."""
    if isinstance(load, str):
        return load.replace("-", " ")
    return f"{pct(float(load))} of capacity"  # type: ignore[arg-type]


def busy_text(rows: pd.DataFrame) -> str:
    """What *partly busy* means in this run, from its parameters."""
    busy = rows[rows["load"] == "partly busy"]
    text = ""
    if not busy.empty and "busy" in busy:
        first = busy.iloc[0]
        text = (f"*Partly busy*: {first.busy} of the {first.concurrency} handler slots run "
                f"{first.slow_ms} ms jobs while the pickup delay of the others is measured. ")
    if "handler_ms" in rows and rows.handler_ms.notna().any():
        text += f"Open-loop handlers take {rows.handler_ms.dropna().iloc[0]} ms each. "
    return text


def samples(ds: Dataset, rows: pd.DataFrame) -> pd.Series:
    """Latency samples per repetition of each case (recorded, else derived from the params)."""
    per_case = {}
    for case, part in rows.groupby("case", sort=False):
        metrics = part.set_index("metric")["median"]
        first = part.iloc[0]
        if "samples" in metrics:
            per_case[case] = metrics["samples"]
        elif first.load == "unloaded" and pd.notna(first.get("jobs")):
            per_case[case] = first.jobs
        elif "offered_per_s" in metrics and pd.notna(first.get("duration_s")):
            per_case[case] = metrics["offered_per_s"] * first.duration_s
    return rows.case.map(per_case)


@scenario_section("latency", **BASELINE)
def latency_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Enqueue-to-handler latency, unloaded and at fractions of capacity, with sample counts."""
    order = sorted(rows["load"].unique(), key=lambda v: (not isinstance(v, str), v != "unloaded", str(v)))
    labels = pd.Categorical(rows["load"].map(load_label), [load_label(v) for v in order], ordered=True)
    rows = rows.assign(load=labels, samples=samples(ds, rows).map(lambda n: fmt(n, 0)))
    shown = [p for p in PERCENTILES if p in set(rows.metric) and p not in ("p90_ms", "p95_ms")]
    in_table = [p for p in shown if p != "max_ms"]  # the maximum is in the chart
    table = wide(ds, rows, ["load", "samples"], in_table, once=True).rename(
        columns={"samples": "samples/rep."})
    rates = [m for m in ("capacity_jobs_per_s", "producers", "offered_per_s", "offered_load")
             if m in set(rows.metric)]
    rate_table = (f"Capacity and the rate actually offered:\n\n{md_table(wide(ds, rows, ['load'], rates))}"
                  "\n\n" if rates else "")
    points = rows[rows.metric.isin(shown)].assign(
        at=lambda r: r.metric.map(shown.index), percentile=lambda r: r.metric.map(
            lambda m: metric_label(m).split(" (")[0])).sort_values("at", kind="stable")
    fig = plot(points, "percentile", "load", str, title="Enqueue-to-handler latency by load",
               x_title="percentile", y_title="ms", log_y=True, category_x=True)
    few = pd.to_numeric(rows.samples.str.replace(",", ""), errors="coerce").min() < FEW_SAMPLES
    note = (f"With fewer than {FEW_SAMPLES:,} samples a p99.9 is the largest sample or next to it: read "
            "it as the maximum." if few else "")
    return (f"{server_label(ds, run, rows.iloc[0].server)}, worker concurrency {rows.iloc[0].concurrency}. "
            f"{(busy_text(rows) + note).strip()}\n\n{md_table(table)}\n\n{rate_table}{chart(fig, 'latency')}")


SECTIONS = {"lifecycle_section": lifecycle_section, "latency_section": latency_section}
