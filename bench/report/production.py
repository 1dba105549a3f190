"""Running in production page: what job results and the deduplication window cost, and what
listing waiting jobs costs other clients.

The first two come from cases added to existing scenarios: ``process`` with ``result_bytes`` (its
metrics end in ``_storing_results``) against the no-op ``process`` case of the same concurrency in
the same run, and ``memory`` with ``id_bytes`` (``bytes_per_retained_id``); the last from the
``listing`` scenario.
"""

from __future__ import annotations

import pandas as pd

from bench.report.common import scenario_section, server_label, stat_cell, wide
from bench.report.compare import BASELINE, change, versus
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, no_data, ratio_digits, span

STORING = "jobs_per_s_storing_results"


@scenario_section("process", "the `process` case with `result_bytes`", need=STORING, **BASELINE)
def result_cost_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """jobs/s of a burst worker storing a result per job over the same drain storing nothing."""
    storing = rows[rows.metric == STORING]
    plain = rows[(rows.metric == "jobs_per_s") & rows.get("result_bytes", pd.Series(index=rows.index)).isna()]
    pairs = versus(storing, plain, "concurrency")
    if pairs.empty:
        return no_data(f"the no-op `process` case at concurrency {storing.concurrency.iloc[0]}")
    found = pairs.iloc[0]
    return (f"{server_label(ds, run, found.server)}, RESP3, hiredis; one burst worker at concurrency "
            f"{fmt(found.concurrency)} draining {fmt(found.payload_bytes)} B jobs, jobs/s "
            "(median and spread):\n\n"
            "| handler returns | jobs/s |\n|---|---|\n"
            f"| `None`, `store_results` off | {stat_cell(found, '_base')} |\n"
            f"| a {fmt(found.result_bytes)} B result, `store_results=True` | {stat_cell(found)} |\n\n"
            f"Storing the result {change(found)} (ratio {ratio_digits(found.ratio)}, range "
            f"{span(found.lo, found.hi)}).")


@scenario_section("memory", "the `memory` case with `id_bytes`", need="bytes_per_retained_id",
                  metric="bytes_per_retained_id")
def dedup_memory_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Server memory per caller-given id retained in the deduplication window."""
    row = rows.iloc[0]
    return (f"{server_label(ds, run, row.server)}: each id of {fmt(row.id_bytes)} B kept in the window "
            f"costs {stat_cell(row)} B (slope of `used_memory` over the number of retained ids), so a "
            f"million retained ids take about {fmt(row['median'] * 1e6 / 2**20)} MiB.")


LISTING_METRICS = ["page_p50_ms", "page_max_ms", "probe_p99_ms", "probe_max_ms"]


@scenario_section("listing", need="probe_max_ms")
def listing_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Page time and another client's PING during back-to-back pages, by limit keys and parked."""
    server = rows.iloc[0].server
    rows = rows.assign(parked=rows.parked.map({True: "one per key", False: "none"}))
    table = wide(ds, rows, ["limit_keys", "parked"], LISTING_METRICS)
    table = table.rename(columns={"probe p99 (ms)": "PING p99 (ms)", "probe max (ms)": "slowest PING (ms)",
                                  "parked": "parked jobs"})
    table["limit keys"] = table["limit keys"].map(fmt)
    return (f"{server_label(ds, run, server)}; each limit key runs one job (`Limit(concurrency=1)`), "
            "and where jobs are parked each key holds one more. Pages of 100 waiting jobs are read back "
            "to back while another client sends PING one at a time: the slowest PING is the longest the "
            "server kept that client waiting.\n\n" + md_table(table))


SECTIONS = {"result_cost_section": result_cost_section, "dedup_memory_section": dedup_memory_section,
            "listing_section": listing_section}
