"""Performance takeaways: sentences computed from like-for-like pairs of one run.

Every sentence compares two cases that differ in exactly one thing, names that thing, and
appears only when the difference is beyond the noise (see :mod:`.compare`).
"""

from __future__ import annotations

import pandas as pd

from bench.report.common import primary_run, primary_server, run_rows, source
from bench.report.compare import BASELINE, ratio, select
from bench.report.load import Dataset
from bench.report.text import fmt, no_data, pct

MOST_OF = 0.8  # "most of the throughput" means at least this share


def _one(rows: pd.DataFrame, **where: object) -> pd.Series | None:
    found = select(rows, **where)
    return found.iloc[0] if len(found) == 1 else None


def concurrency(rows: pd.DataFrame) -> list[str]:
    """Per payload: a lower concurrency giving most of the top throughput at a lower p99."""
    out = []
    for payload, part in rows.groupby("payload_bytes", sort=True):
        levels = sorted(part.concurrency.unique())
        top = levels[-1]
        rate_top = _one(part, concurrency=top, metric="lifecycles_per_s")
        p99_top = _one(part, concurrency=top, metric="p99_ms")
        for level in levels[:-1]:
            rate = _one(part, concurrency=level, metric="lifecycles_per_s")
            p99 = _one(part, concurrency=level, metric="p99_ms")
            if any(x is None for x in (rate, p99, rate_top, p99_top)):
                continue
            speed, wait = ratio(rate, rate_top), ratio(p99, p99_top)
            if speed["ratio"] < MOST_OF or wait["noise"] or wait["ratio"] > 1:
                continue
            how = ("as many lifecycles per second as" if speed["noise"] else
                   f"{pct(abs(speed['ratio'] - 1))} {'more' if speed['ratio'] > 1 else 'fewer'}"
                   " lifecycles per second than")
            out.append(f"With {payload} B payloads, {level} concurrent tasks complete {how} "
                       f"{top} tasks, with a p99 of {fmt(p99['median'])} ms instead of "
                       f"{fmt(p99_top['median'])} ms.")
            break
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
