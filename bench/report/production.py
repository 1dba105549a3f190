"""Running in production page: what job results and the deduplication window cost.

Both figures come from cases added to existing scenarios: ``process`` with ``result_bytes`` (its
metrics end in ``_storing_results``) against the no-op ``process`` case of the same concurrency in
the same run, and ``memory`` with ``id_bytes`` (``bytes_per_retained_id``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from bench.report.common import primary_run, primary_server, server_label, source, stat_cell
from bench.report.compare import BASELINE, ratio, select
from bench.report.load import Dataset
from bench.report.text import fmt, no_data, pct, span

STORING = "jobs_per_s_storing_results"
MIB = 1024 * 1024


def _with_metric(ds: Dataset, scenario: str, metric: str) -> tuple[str, str, pd.DataFrame] | None:
    """(run, server, rows) of the run a section shows, among runs that measured ``metric``."""
    only = ds.summary[(ds.summary.scenario == scenario) & (ds.summary.metric == metric)]
    run = primary_run(dataclasses.replace(ds, summary=only), scenario)
    if run is None:
        return None
    server = primary_server(dataclasses.replace(ds, summary=only), run, scenario) or ""
    return run, server, select(ds.summary, run_id=run, scenario=scenario, server=server)


def result_cost_section(ds: Dataset, prefix: str = "") -> str:
    """jobs/s of a burst worker storing a result per job over the same drain storing nothing."""
    found = _with_metric(ds, "process", STORING)
    if found is None:
        return no_data("the `process` case with `result_bytes`")
    run, server, rows = found
    rows = select(rows, **BASELINE)
    storing = rows[rows.metric == STORING].iloc[0]
    plain = rows[(rows.metric == "jobs_per_s") & (rows.concurrency == storing.concurrency)]
    plain = plain[plain["result_bytes"].isna()] if "result_bytes" in plain else plain
    if plain.empty:
        return no_data(f"the no-op `process` case at concurrency {storing.concurrency}")
    found_ratio = ratio(storing, plain.iloc[0])
    verdict = ("within the noise" if found_ratio["noise"]
               else f"{'costs' if found_ratio['ratio'] < 1 else 'gains'} "
                    f"{pct(abs(1 - found_ratio['ratio']))}")
    return (f"{server_label(ds, run, server)}, RESP3, hiredis; one burst worker at concurrency "
            f"{fmt(storing.concurrency)} draining {fmt(storing.payload_bytes)} B jobs, jobs/s ± MAD:"
            f"\n\n| handler returns | jobs/s |\n|---|---|\n"
            f"| `None`, `store_results` off | {stat_cell(plain.iloc[0])} |\n"
            f"| a {fmt(storing.result_bytes)} B result, `store_results=True` | "
            f"{stat_cell(storing)} |\n\n"
            f"Storing the result {verdict} (ratio {fmt(found_ratio['ratio'], 2)}, range "
            f"{span(found_ratio['lo'], found_ratio['hi'])}).\n\n{source(ds, run, prefix)}\n")


def dedup_memory_section(ds: Dataset, prefix: str = "") -> str:
    """Server memory per caller-given id retained in the deduplication window."""
    found = _with_metric(ds, "memory", "bytes_per_retained_id")
    if found is None:
        return no_data("the `memory` case with `id_bytes`")
    run, server, rows = found
    row = rows[rows.metric == "bytes_per_retained_id"].iloc[0]
    million = row["median"] * 1e6 / MIB
    return (f"{server_label(ds, run, server)}: each id of {fmt(row.id_bytes)} B kept in the window "
            f"costs {stat_cell(row)} B (slope of `used_memory` over the number of retained ids), "
            f"so a million retained ids take about {fmt(million)} MiB.\n\n"
            f"{source(ds, run, prefix)}\n")


SECTIONS = {"result_cost_section": result_cost_section,
            "dedup_memory_section": dedup_memory_section}
