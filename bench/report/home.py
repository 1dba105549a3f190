"""Home page: a few headline figures at stated, like-for-like conditions, with links."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from bench.report.common import REFERENCE_SERVER, by_run, machine, run_rows, server_label, source, stat_cell
from bench.report.compare import BASELINE, select
from bench.report.load import Dataset
from bench.report.peers import peers_run
from bench.report.points import COMPARED, ENQUEUE_MANY, LIFECYCLE, MEMORY, NOT_MEASURED, PROCESS, Point
from bench.report.servers import cell, comparisons, dragonfly_runs, loaded_host, server_columns, verdict
from bench.report.text import STAT_HEADER, md_table, no_data, times, unit_of

# (figure, stated point, conditions in words, link); the words name the point's conditions.
HEADLINES: tuple[tuple[str, Point, str, str], ...] = (
    ("Jobs processed per second", PROCESS,
     "one worker, {concurrency} no-op handlers at once, draining {jobs:,} jobs of {payload_bytes} B",
     "performance.md#process"),
    ("Lifecycles per second", LIFECYCLE,
     "{concurrency} tasks, each enqueueing, claiming and acking one {payload_bytes} B job at a time; "
     "p99 per lifecycle {p99}", "performance.md#lifecycle"),
    ("Jobs enqueued per second", ENQUEUE_MANY,
     "one producer, batches of {batch} jobs of {payload_bytes} B; p99 per batch {p99}",
     "performance.md#enqueue"),
    ("Memory per waiting job", MEMORY,
     "payload {payload_bytes} B, default hash-max-listpack-value", "tuning.md#memory"),
)


class _NotRecorded(str):
    def __format__(self, spec: str) -> str:
        return "(not recorded)"


class _Values(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return _NotRecorded()


def headline_row(ds: Dataset, spec: tuple[str, Point, str, str]) -> tuple[str, dict[str, str]] | None:
    """(run, table row) of one headline at its stated point, or None when the scenario was never
    measured; the file's own words for that case (its headline mark) come before ours."""
    label, point, words, link = spec
    found = run_rows(ds, point.scenario, **BASELINE)
    if found is None:
        return None
    run, rows = found
    row = point.rows(rows)
    if row.empty:
        return run, {"figure": f"[{label}]({link})", STAT_HEADER: NOT_MEASURED,
                     "conditions": f"{point.label}; {server_label(ds, run, rows.server.iloc[0])}"}
    first = row.iloc[0]
    marked = select(ds.cases, run_id=run, scenario=point.scenario, server=first.server, case=first.case,
                    **BASELINE).dropna(subset=["headline"])
    if not marked.empty and marked.iloc[0].headline["metric"] == point.metric:
        words = same_run(ds, run, marked.iloc[0].headline["conditions"].replace("{", "{{").replace("}", "}}"))
    p99 = select(rows, case=first.case, metric="p99_ms")
    values = _Values({k: v for k, v in first.items() if isinstance(k, str) and not isinstance(v, list)
                      and pd.notna(v)}, p99=f"{stat_cell(p99.iloc[0])} ms" if len(p99) else "not measured")
    return run, {"figure": f"[{label}]({link})",
                 STAT_HEADER: f"{stat_cell(first)} {unit_of(point.metric, first.unit)}",
                 "conditions": words.format_map(values) + f"; {server_label(ds, run, first.server)}"}


def same_run(ds: Dataset, run: str, words: str) -> str:
    """The harness's 'like for like with <scenario>' means that scenario's case in the same run:
    where the site shows that scenario from another run, say which run the words mean and which
    one the linked page shows, lest a reader compare across runs (and machines)."""
    found = re.search(r"like for like with ([a-z-]+)", words)
    shown = run_rows(ds, found[1]) if found else None
    if found is None or shown is None or shown[0] == run:
        return words
    return words.replace(found[0], f"{found[0]} of run `{run}`, not with the figures of run `{shown[0]}` "
                                   f"({machine(ds, shown[0])}) the linked page shows for it")


def dragonfly_line(ds: Dataset) -> str:
    """Dragonfly against the Valkey 9.1 of its own run, both lock modes, at the first shared point."""
    runs = dragonfly_runs(ds)
    if not runs:
        return ""
    hashtag, glob = (comparisons(ds, runs[-1], "dragonfly", c) for c in ("default", "global-lock"))
    both = [p.label for p in COMPARED if p.label in set(hashtag.point) & set(glob.point)]
    if not both:
        return ""
    loaded = loaded_host(ds, runs[-1])
    caveat = (f"; that run's host was slower or busier ({REFERENCE_SERVER} at {times(loaded[0])} the EVALSHA "
              f"rate of {loaded[1]}), so read it as indicative") if loaded is not None else ""
    return (f"- **Dragonfly**, {both[0]}, as a ratio to {REFERENCE_SERVER} in its own run "
            f"(`{runs[-1]}`, {machine(ds, runs[-1])}): {cell(hashtag, both[0])} with `--lock_on_hashtags`, "
            f"{cell(glob, both[0])} with global locking{caveat} ([Servers](servers.md#dragonfly)).")


def other_machine_note(ds: Dataset, run: str) -> str:
    """A warning when the peer ratios shown above the table come from another machine than it."""
    peers = peers_run(ds)
    if peers is None or machine(ds, peers.run_id) == machine(ds, run):
        return ""
    return (f"The figures in this table come from run `{run}` ({machine(ds, run)}); the peer ratios "
            f"above from run `{peers.run_id}` ({machine(ds, peers.run_id)}). Ratios travel between "
            "machines, absolute figures do not: set no figure of this table against a peer's.\n\n")


def headline(ds: Dataset, prefix: str = "") -> str:
    """Headline table, server verdict and Dragonfly ratio, each with its source."""
    found = [h for h in (headline_row(ds, spec) for spec in HEADLINES) if h]
    if not found:
        return no_data("any of the headline scenarios")
    runs = list(dict.fromkeys(run for run, _ in found))
    servers = (verdict(ds, runs[0], brief=True).replace("**From this run:** ", "")
               if server_columns(ds, runs[0]) else "")
    # headlines of several runs (each scenario's newest full one) say which run each came from
    table, note = by_run(pd.DataFrame([{**row, "run": run} for run, row in found]))
    return (f"{note}{md_table(table)}\n\n{other_machine_note(ds, runs[0])}"
            f"- **Servers**: {servers} "
            f"([Servers](servers.md))\n{dragonfly_line(ds)}\n\n"
            + "\n\n".join(source(ds, r, prefix) for r in runs) + "\n")


SECTIONS = {"headline": headline}
