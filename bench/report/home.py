"""Home page: a few headline figures at stated, like-for-like conditions, with links."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.common import REFERENCE_SERVER, run_rows, server_label, source, stat_cell
from bench.report.compare import BASELINE, prefer, select
from bench.report.load import Dataset
from bench.report.servers import POINTS, cell, comparisons, dragonfly_runs, server_columns, verdict
from bench.report.text import md_table, no_data, unit_of

# (figure, scenario, metric, preferred params, conditions in words, link)
HEADLINES: tuple[tuple[str, str, str, dict[str, Any], str, str], ...] = (
    ("Jobs processed per second", "process", "jobs_per_s", {"concurrency": 32},
     "one worker, {concurrency} no-op handlers at once, draining {jobs:,} jobs of {payload_bytes} B",
     "performance.md#process"),
    ("Lifecycles per second", "lifecycle", "lifecycles_per_s", {"payload_bytes": 64, "concurrency": 8},
     "{concurrency} tasks, each enqueueing, claiming and acking one {payload_bytes} B job at a time; "
     "p99 per lifecycle {p99}", "performance.md#lifecycle"),
    ("Jobs enqueued per second", "enqueue-bulk", "jobs_per_s", {"producers": 4},
     "{producers} producers, batches of {batch} jobs of {payload_bytes} B; p99 per batch {p99}",
     "performance.md#enqueue"),
    ("Memory per waiting job", "memory", "bytes_per_job", {"payload_bytes": 256},
     "payload {payload_bytes} B, default hash-max-listpack-value", "tuning.md#memory"),
)


class _NotRecorded(str):
    def __format__(self, spec: str) -> str:
        return "(not recorded)"


class _Values(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return _NotRecorded()


def headline_row(ds: Dataset, spec: tuple[str, str, str, dict[str, Any], str, str]
                 ) -> tuple[str, dict[str, str]] | None:
    """(run, table row) of one headline, or None when not measured; a case the file marks as its
    headline (with its conditions in words) comes before the preferred parameters."""
    label, scenario, name, wanted, words, link = spec
    found = run_rows(ds, scenario, **BASELINE)
    if found is None:
        return None
    run, rows = found
    marked = select(ds.cases, run_id=run, scenario=scenario, server=rows.server.iloc[0], **BASELINE).dropna(
        subset=["headline"])
    if not marked.empty:
        name = marked.iloc[0].headline["metric"]
        words = marked.iloc[0].headline["conditions"].replace("{", "{{").replace("}", "}}")
        row = rows[(rows.case == marked.iloc[0].case) & (rows.metric == name)]
    else:
        row = prefer(rows[rows.metric == name], wanted, closest=True)
    if row.empty:
        return None
    first = row.iloc[0]
    p99 = select(rows, case=first.case, metric="p99_ms")
    values = _Values({k: v for k, v in first.items() if isinstance(k, str) and not isinstance(v, list)
                      and pd.notna(v)}, p99=f"{stat_cell(p99.iloc[0])} ms" if len(p99) else "not measured")
    return run, {"figure": f"[{label}]({link})",
                 "median ± MAD": f"{stat_cell(first)} {unit_of(name, first.unit)}",
                 "conditions": words.format_map(values) + f"; {server_label(ds, run, first.server)}"}


def dragonfly_line(ds: Dataset) -> str:
    """Dragonfly against the Valkey 9.1 of its own run, both lock modes, at the first shared point."""
    runs = dragonfly_runs(ds)
    if not runs:
        return ""
    hashtag, glob = (comparisons(ds, runs[-1], "dragonfly", c) for c in ("default", "global-lock"))
    both = [p[0] for p in POINTS if p[0] in set(hashtag.point) & set(glob.point)]
    if not both:
        return ""
    return (f"- **Dragonfly**, {both[0]}, as a ratio to {REFERENCE_SERVER} in its own run: "
            f"{cell(hashtag, both[0])} with `--lock_on_hashtags`, {cell(glob, both[0])} with global locking "
            "([Servers](servers.md#dragonfly)).")


def headline(ds: Dataset, prefix: str = "") -> str:
    """Headline table, server verdict and Dragonfly ratio, each with its source."""
    found = [h for h in (headline_row(ds, spec) for spec in HEADLINES) if h]
    if not found:
        return no_data("any of the headline scenarios")
    runs = list(dict.fromkeys(run for run, _ in found))
    servers = verdict(ds, runs[0]).replace("**From this run:** ", "") if server_columns(ds, runs[0]) else ""
    return (f"{md_table(pd.DataFrame([row for _, row in found]))}\n\n- **Servers**: {servers} "
            f"([Servers](servers.md))\n{dragonfly_line(ds)}\n\n"
            + "\n\n".join(source(ds, r, prefix) for r in runs) + "\n")


SECTIONS = {"headline": headline}
