"""Performance page, second half: lifecycles, enqueue-to-handler latency and the takeaways.

Every takeaway compares two cases of one run that differ in exactly one thing, names that thing,
and appears only when the difference is beyond the noise (see :mod:`.compare`).
"""

from __future__ import annotations

import pandas as pd

from bench.report.common import (
    machine,
    primary_run,
    primary_server,
    run_rows,
    scenario_section,
    server_label,
    source,
    wide,
)
from bench.report.compare import BASELINE, STATS, prefer, select, versus
from bench.report.figures import chart, metric_lines, plot
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, metric_label, no_data, pct, times

PERCENTILES = ["p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_9_ms", "max_ms"]
FEW_SAMPLES = 1000  # below this, a p99.9 is the largest sample or next to it
MOST_OF = 0.8  # "most of the throughput" means at least this share


@scenario_section("lifecycle", **BASELINE)
def lifecycle_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Throughput and latency of enqueue-claim-ack by payload and concurrency."""
    table = wide(ds, rows, ["payload_bytes", "concurrency"], ["lifecycles_per_s", "p50_ms", "p99_ms"],
                 once=True)
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
               x_title="percentile", y_title="latency (ms)", log_y=True, category_x=True)
    few = pd.to_numeric(rows.samples.str.replace(",", ""), errors="coerce").min() < FEW_SAMPLES
    note = (f"With fewer than {FEW_SAMPLES:,} samples a p99.9 is the largest sample or next to it: read "
            "it as the maximum." if few else "")
    return (f"{server_label(ds, run, rows.iloc[0].server)}, worker concurrency {rows.iloc[0].concurrency}. "
            f"{(busy_text(rows) + note).strip()}\n\n{md_table(table)}\n\n{rate_table}{chart(fig, 'latency')}")


def concurrency(rows: pd.DataFrame) -> list[str]:
    """Per payload: the lowest concurrency giving most of the top throughput at a lower p99."""
    rows = rows.assign(top=rows.groupby("payload_bytes").concurrency.transform("max"))

    def to_top(metric: str) -> pd.DataFrame:
        part = rows[rows.metric == metric]
        return versus(part[part.concurrency < part.top],
                      part[part.concurrency == part.top][["payload_bytes", *STATS]], "payload_bytes")

    both = to_top("lifecycles_per_s").merge(to_top("p99_ms"), on=["payload_bytes", "concurrency"],
                                            suffixes=("", "_p99"))
    found = both[(both.ratio >= MOST_OF) & ~both.noise_p99.astype(bool) & (both.ratio_p99 <= 1)]
    out = []
    first = found.sort_values(["payload_bytes", "concurrency"]).groupby("payload_bytes").head(1)
    for r in first.itertuples():
        how = ("as many lifecycles per second as" if r.noise else
               f"{pct(abs(r.ratio - 1))} {'more' if r.ratio > 1 else 'fewer'} lifecycles per second than")
        out.append(f"With {r.payload_bytes} B payloads, {r.concurrency} concurrent tasks complete {how} "
                   f"{r.top} tasks, with a p99 of {fmt(r.median_p99)} ms instead of "
                   f"{fmt(r.median_base_p99)} ms.")
    return out


def bulk(ds: Dataset, run: str) -> list[str]:
    """``enqueue_many`` against one call per job: one producer each, same payload."""
    server = primary_server(ds, run, "enqueue-single")
    single = select(ds.summary, run_id=run, scenario="enqueue-single", server=server,
                    metric="jobs_per_s", **BASELINE)
    many = select(ds.summary, run_id=run, scenario="enqueue-bulk", server=server,
                  metric="jobs_per_s", **BASELINE)
    if "producers" in many:
        many = many[many.producers.fillna(1) == 1]
    single = prefer(single, {"callers": 1, "batching": False})  # one call at a time, like for like
    found = versus(many[~many.payload_bytes.duplicated(keep=False)], single, "payload_bytes")
    return [f"With one producer and {r.payload_bytes} B payloads, enqueueing in batches of {r.batch} gives "
            f"{times(r.ratio)} the jobs/s of one enqueue call at a time ({fmt(r.median)} against "
            f"{fmt(r.median_base)} jobs/s{elsewhere(ds, run)})."
            for r in found[~found.noise].itertuples()]


def elsewhere(ds: Dataset, run: str) -> str:
    """Where the one-job-per-call table above comes from another run than ``run``: say so, since
    a reader divides the figures shown and gets another ratio than the one stated."""
    shown = run_rows(ds, "enqueue-single")
    if shown is None or shown[0] == run:
        return ""
    return (f", both in run `{run}`; the one-job-per-call table above comes from run `{shown[0]}` "
            f"({machine(ds, shown[0])}) and is not the one compared here")


def performance_takeaways(ds: Dataset, prefix: str = "") -> str:
    """Bulleted takeaways computed from the run each section shows."""
    items: dict[str, list[str]] = {}
    life = run_rows(ds, "lifecycle", **BASELINE)
    if life is not None:
        items.setdefault(life[0], []).extend(concurrency(life[1]))
    enq = primary_run(ds, "enqueue-bulk")
    if enq is not None:
        items.setdefault(enq, []).extend(bulk(ds, enq))
    if not any(items.values()):
        return ("No takeaway is supported by the current result files: no difference between "
                "the measured settings exceeds the noise." if not ds.empty
                else no_data("the scenarios behind the takeaways"))
    lines = [f"- {text}" for texts in items.values() for text in texts]
    sources = "\n\n".join(source(ds, run, prefix) for run, texts in items.items() if texts)
    return "\n".join(lines) + f"\n\n{sources}\n"


SECTIONS = {"lifecycle_section": lifecycle_section, "latency_section": latency_section,
            "performance_takeaways": performance_takeaways}
