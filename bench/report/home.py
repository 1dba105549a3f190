"""Home page: a few headline figures at stated, like-for-like conditions, with links."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.common import REFERENCE_SERVER, primary_run, primary_server, server_label, source, stat_cell
from bench.report.compare import BASELINE, prefer, select
from bench.report.load import Dataset
from bench.report.servers import POINTS, cell, comparisons, dragonfly_runs, server_columns, verdict
from bench.report.text import md_table, no_data, unit_of

# (figure, scenario, metric, preferred params, conditions in words, link)
HEADLINES: tuple[tuple[str, str, str, dict[str, Any], str, str], ...] = (
    ("Jobs processed per second", "process", "jobs_per_s", {"concurrency": 32},
     "one worker, {concurrency} no-op handlers at once, draining {jobs:,} jobs of "
     "{payload_bytes} B", "performance.md#process"),
    ("Lifecycles per second", "lifecycle", "lifecycles_per_s",
     {"payload_bytes": 64, "concurrency": 8},
     "{concurrency} tasks, each enqueueing, claiming and acking one {payload_bytes} B job at a "
     "time; p99 per lifecycle {p99}", "performance.md#lifecycle"),
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
    """(run, table row) of one headline, or None when not measured."""
    label, scenario, name, wanted, words, link = spec
    run = primary_run(ds, scenario)
    if run is None:
        return None
    rows = select(ds.summary, run_id=run, scenario=scenario,
                  server=primary_server(ds, run, scenario), **BASELINE)
    marked = select(ds.cases, run_id=run, scenario=scenario, server=primary_server(ds, run, scenario),
                    **BASELINE).dropna(subset=["headline"])
    if not marked.empty:  # the file names its headline case and its conditions in plain words
        name = marked.iloc[0].headline["metric"]
        words = marked.iloc[0].headline["conditions"].replace("{", "{{").replace("}", "}}")
        row = rows[(rows.case == marked.iloc[0].case) & (rows.metric == name)]
    else:
        row = prefer(rows[rows.metric == name], wanted, closest=True)
    if row.empty:
        return None
    first = row.iloc[0]
    p99 = select(rows, case=first.case, metric="p99_ms")
    values = _Values({k: first[k] for k in first.index
                      if isinstance(k, str) and not isinstance(first[k], list) and pd.notna(first[k])})
    values["p99"] = f"{stat_cell(p99.iloc[0])} ms" if not p99.empty else "not measured"
    conditions = words.format_map(values) + f"; {server_label(ds, run, first.server)}"
    return run, {"figure": f"[{label}]({link})",
                 "median ± MAD": f"{stat_cell(first)} {unit_of(name, first.unit)}",
                 "conditions": conditions}


def dragonfly_line(ds: Dataset) -> str:
    """Dragonfly against the Valkey 9.1 of its own run, both lock modes."""
    runs = dragonfly_runs(ds)
    if not runs:
        return ""
    run = runs[-1]
    hashtag, glob = (comparisons(ds, run, "dragonfly", c) for c in ("default", "global-lock"))
    both = [p[0] for p in POINTS if p[0] in set(hashtag.point) & set(glob.point)]
    if not both:
        return ""
    point = both[0]
    return (f"- **Dragonfly**, {point}, as a ratio to {REFERENCE_SERVER} in its own run: "
            f"{cell(hashtag, point)} with `--lock_on_hashtags`, {cell(glob, point)} with global "
            "locking ([Servers](servers.md#dragonfly)).")


def headline(ds: Dataset, prefix: str = "") -> str:
    """Headline table, server verdict and Dragonfly ratio, each with its source."""
    found = [h for h in (headline_row(ds, spec) for spec in HEADLINES) if h]
    if not found:
        return no_data("any of the headline scenarios")
    runs = list(dict.fromkeys(run for run, _ in found))
    table = md_table(pd.DataFrame([row for _, row in found]))
    main = runs[0]
    found = verdict(ds, main) if server_columns(ds, main) else ""
    sources = "\n\n".join(source(ds, r, prefix) for r in runs)
    return (f"{table}\n\n- **Servers**: {found.replace('**From this run:** ', '')} "
            f"([Servers](servers.md))\n{dragonfly_line(ds)}\n\n{sources}\n")


SECTIONS = {"headline": headline}
