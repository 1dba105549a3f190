"""Performance takeaways: sentences computed from like-for-like pairs of one run.

Every sentence compares two cases that differ in exactly one thing, names that thing, and
appears only when the difference is beyond the noise (see :mod:`.compare`).
"""

from __future__ import annotations

import pandas as pd

from bench.report.common import primary_run, primary_server, run_rows, source
from bench.report.compare import BASELINE, STATS, ratio, select, versus
from bench.report.load import Dataset
from bench.report.text import fmt, no_data, pct

MOST_OF = 0.8  # "most of the throughput" means at least this share


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
    out = []
    for _, one in single.iterrows():
        match = many[many.payload_bytes == one.payload_bytes]
        if len(match) != 1:
            continue
        found = ratio(match.iloc[0], one)
        if not found["noise"]:
            out.append(f"With one producer and {one.payload_bytes} B payloads, enqueueing in "
                       f"batches of {match.iloc[0].batch} gives {found['ratio']:.1f}x the jobs/s "
                       "of one enqueue call per job.")
    return out


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


SECTIONS = {"performance_takeaways": performance_takeaways}
