"""Tuning page: memory per job, persistence, maintenance batch, I/O threads.

A recommendation is stated only when it holds in every committed full run of the same method
on the same machine; otherwise the page shows how the runs disagree.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]
from conveyor import QueueSettings

from bench.report.common import (
    defaults_note,
    primary_run,
    primary_server,
    scenario_section,
    server_label,
    source,
    stat_cell,
    wide,
)
from bench.report.compare import ratio, same_method_runs, select
from bench.report.figures import bar, chart, figure, metric_lines, whiskers
from bench.report.load import Dataset
from bench.report.text import MISSING, fmt, md_table, no_data, pct, span, times

LISTPACK = "listpack-1024"
AOF = {"aof-everysec": "appendfsync everysec", "aof-always": "appendfsync always"}
AOF_SCENARIOS = {"enqueue-single": "jobs_per_s", "enqueue-bulk": "jobs_per_s",
                 "process": "jobs_per_s", "lifecycle": "lifecycles_per_s"}
MIB = 1024 * 1024


@scenario_section("memory", metric="bytes_per_job", config=["default", LISTPACK])
def memory_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Bytes per job by payload, default and 1024 listpack limit, with encodings and 1M jobs."""
    server = rows.iloc[0].server
    rows = rows.merge(ds.cases[["run_id", "server", "config", "case", "encoding"]],
                      on=["run_id", "server", "config", "case"], how="left")
    rows = rows.assign(shown=[f"{stat_cell(r)} ({r.encoding or 'encoding not recorded'})"
                              for _, r in rows.iterrows()],
                       million=(rows["median"] * 1e6 / MIB).map(lambda v: f"{fmt(v)} MiB"))
    names = {"default": "limit 64 (default)", LISTPACK: "limit 1024"}
    table, million = (rows.pivot(index="payload_bytes", columns="config", values=v).rename(
        columns=names).reset_index().rename(columns={"payload_bytes": "payload (B)"})
        for v in ("shown", "million"))
    fig = figure("Memory per waiting job by payload", "payload", "B/job", category_x=True)
    for config, group in rows.groupby("config", sort=True):
        part = group.sort_values("payload_bytes")
        fig.add_trace(bar([f"{p} B" for p in part.payload_bytes], part,
                          f"hash-max-listpack-value {names[config].split()[1]}"))
    return (f"{server_label(ds, run, server)}; B/job ± MAD (hash encoding of a sample job).\n\n"
            f"{md_table(table)}\n\nMemory for 1 million waiting jobs:\n\n{md_table(million)}\n\n"
            f"{chart(fig, 'memory')}\n\n{memory_advice(rows)}")


def memory_advice(rows: pd.DataFrame) -> str:
    """The recommendation, when the data shows a saving beyond noise."""
    saved = []
    for payload, part in rows.groupby("payload_bytes", sort=True):
        by = part.set_index("config")
        if {"default", LISTPACK} <= set(by.index):
            found = ratio(by.loc[LISTPACK], by.loc["default"])
            if not found["noise"] and found["ratio"] < 1:
                saved.append(f"{payload} B ({pct(1 - found['ratio'])} less)")
    if not saved:
        return "No payload size shows a memory difference beyond noise between the two limits."
    return ("**Recommendation:** with payloads up to 1 KiB, set `hash-max-listpack-value 1024`: "
            f"memory per job drops for payloads of {', '.join(saved)}.")


def aof_ratios(ds: Dataset, run: str) -> pd.DataFrame:
    """Throughput with each AOF mode over persistence off, per scenario, in one run."""
    out = []
    for scenario, name in AOF_SCENARIOS.items():
        rows = select(ds.summary, run_id=run, scenario=scenario, metric=name, protocol=3,
                      parser="hiredis", server=primary_server(ds, run, scenario))
        off = rows[rows.config == "default"].set_index("case")
        for config, label in AOF.items():
            for case, row in rows[rows.config == config].set_index("case").iterrows():
                if case in off.index:
                    out.append({"run_id": run, "scenario": scenario, "mode": label,
                                **ratio(row, off.loc[case])})
    return pd.DataFrame(out, columns=["run_id", "scenario", "mode", "ratio", "lo", "hi", "noise"])


def verdict(found: pd.DataFrame) -> str:
    """``costs 11%`` / ``noise`` for one run's ratio row."""
    if found.noise:
        return "noise"
    return f"{'costs' if found.ratio < 1 else 'gains'} {pct(abs(1 - found.ratio))}"


def persistence_section(ds: Dataset, prefix: str = "") -> str:
    """AOF everysec and always against persistence off, checked across comparable runs."""
    run = primary_run(ds, "process")
    found = aof_ratios(ds, run) if run else pd.DataFrame()
    if run is None or found.empty:
        return no_data("a persistence comparison (configurations `aof-everysec`, `aof-always`)")
    runs = list(dict.fromkeys([run, *same_method_runs(ds, run)]))
    every = pd.concat([aof_ratios(ds, r) for r in runs])
    rows = []
    for (scenario, mode), part in found.groupby(["scenario", "mode"], sort=False):
        row = part.iloc[0]
        others = every[(every.scenario == scenario) & (every["mode"] == mode)]
        verdicts = {verdict(o) for _, o in others.iterrows()}
        agree = len({v.split()[0] for v in verdicts}) == 1
        spread = (f"{span(others.ratio.min(), others.ratio.max(), times)} over {len(others)} "
                  "runs" if len(others) > 1 else "one run")
        rows.append({"scenario": scenario, "mode": mode,
                     "vs off": f"{times(row.ratio)} ({span(row.lo, row.hi)})",
                     "this run": verdict(row),
                     "across runs": ("same verdict, " if agree else "**differs**, ") + spread})
    table = pd.DataFrame(rows)
    fig = figure("Throughput with AOF, relative to persistence off", "scenario",
                 "ratio to persistence off (above 1 = faster)", category_x=True)
    for mode, part in found.groupby("mode", sort=False):
        fig.add_trace(go.Bar(x=part.scenario, y=part.ratio, name=mode,
                             error_y=whiskers(part, "ratio", "lo", "hi")))
    stable = table[~table["across runs"].str.startswith("**")]
    costly = stable[stable["this run"].str.startswith("costs")]
    advice = ("**Measured in every comparable run:** " + "; ".join(
        f"{r['mode']} {r['this run']} in {r.scenario}" for _, r in costly.iterrows()) + "."
        if not costly.empty else "No AOF cost holds in every comparable run.")
    server = server_label(ds, run, primary_server(ds, run, "process") or "")
    return (f"{server}; ratio of medians with whiskers (worst to best pairing of repetitions). *Across "
            f"runs*: the same comparison in each full run of this method on this machine "
            f"({len(runs)}).\n\n{md_table(table)}\n\n{chart(fig, 'persistence')}\n\n{advice} "
            "If the queue must survive a crash, enable AOF (`appendonly yes`) with `appendfsync "
            f"everysec`; `always` calls fsync on every write.\n\n{source(ds, run, prefix)}\n")


@scenario_section("maintenance", config="default")
def maintenance_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Batch size against promotion rate, sweep time and other clients' PING p99."""
    server = rows.iloc[0].server
    shown = [m for m in ("items_per_s", "sweep_p99_ms", "probe_p99_ms") if m in set(rows.metric)]
    extra = ds.cases.set_index(["run_id", "server", "config", "case"]).extra
    probes = [extra.get((run, server, "default", c), {}).get("probe_samples") for c in rows.case]
    rows = rows.assign(probes=[MISSING if p is None else p for p in probes])
    table = wide(ds, rows, ["backlog", "batch", "probes"], shown).rename(
        columns={"probes": "PING samples", "probe p99 (ms)": "PING p99 (ms)"})
    charts = metric_lines(rows, (("items_per_s", "Jobs promoted per second by batch"),
                                 ("probe_p99_ms", "Another client's PING p99 during sweeps")),
                          lambda name: f"maint-{name}", "batch", "backlog",
                          y_title=lambda _, unit: unit, x_title="maintenance_batch",
                          label=lambda k: f"backlog {k[0]:,}")
    default = defaults_note(ds, run, {"queue.maintenance_batch": QueueSettings().maintenance_batch})
    return (f"{server_label(ds, run, server)}. {default} *PING*: another client's round trip during the "
            f"sweeps; with under 100 samples its p99 is the slowest one.\n\n{md_table(table)}\n\n"
            + "\n\n".join(charts))


def io_threads_note(ds: Dataset, prefix: str = "") -> str:
    """States the core counts behind the published results."""
    cores = sorted(set(ds.runs.cores))
    if not cores:
        return ""
    verdict_text = ("so this site publishes no io-threads figures." if max(cores) < 4 else
                    "io-threads figures would need a run that sets `io-threads`; none does yet.")
    return (f"The result files on this site were measured on machines with "
            f"{', '.join(map(str, cores))} cores, {verdict_text}")


SECTIONS = {"memory_section": memory_section, "persistence_section": persistence_section,
            "maintenance_section": maintenance_section, "io_threads_note": io_threads_note}
