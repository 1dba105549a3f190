"""Tuning page: memory per job, persistence, maintenance batch, worker prefetch, I/O threads.

A recommendation is stated only when it holds in every committed full run of the same method on
the same machine; otherwise the page shows how the runs disagree.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
from conveyor import QueueSettings

from bench.report.common import (
    defaults_note,
    extras,
    primary_run,
    primary_server,
    scenario_section,
    server_label,
    server_rank,
    source,
    stat_cell,
    wide,
)
from bench.report.compare import BASELINE, change, ratio_text, same_method_runs, select, versus
from bench.report.figures import chart, metric_lines, plot, ratio_bars
from bench.report.load import Dataset
from bench.report.text import MISSING, fmt, md_table, no_data, pct, span, times

LISTPACK = "listpack-1024"
LIMITS = {"default": "limit 64 (default)", LISTPACK: "limit 1024"}
AOF = {"aof-everysec": "appendfsync everysec", "aof-always": "appendfsync always"}
AOF_SCENARIOS = {"enqueue-single": "jobs_per_s", "enqueue-bulk": "jobs_per_s", "process": "jobs_per_s",
                 "lifecycle": "lifecycles_per_s"}
MIB = 1024 * 1024
P99_SAMPLES = 100  # fewer samples than this make a p99 the slowest sample, or next to it


@scenario_section("memory", metric="bytes_per_job", config=["default", LISTPACK])
def memory_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Bytes per job by payload, default and 1024 listpack limit, with encodings and 1M jobs."""
    rows = rows.merge(ds.cases[["run_id", "server", "config", "case", "encoding"]], how="left",
                      on=["run_id", "server", "config", "case"]).sort_values("payload_bytes", kind="stable")
    rows = rows.assign(shown=[f"{stat_cell(r)} ({r.encoding or 'encoding not recorded'})"
                              for _, r in rows.iterrows()],
                       million=(rows["median"] * 1e6 / MIB).map(lambda v: f"{fmt(v)} MiB"),
                       payload=rows.payload_bytes.map(lambda p: f"{p} B"))
    table, million = (rows.pivot(index="payload_bytes", columns="config", values=v).rename(columns=LIMITS)
                      .reset_index().rename(columns={"payload_bytes": "payload (B)"})
                      for v in ("shown", "million"))
    fig = plot(rows, "payload", "config", lambda c: f"hash-max-listpack-value {LIMITS[c].split()[1]}",
               title="Memory per waiting job by payload", x_title="payload", y_title="B/job", category_x=True)
    # a comparable run that did not measure the two limits at a payload neither supports nor
    # contradicts a saving there: only the runs that measured it are counted
    every = [listpack_ratios(ds, r, rows.iloc[0].server)
             for r in dict.fromkeys([run, *same_method_runs(ds, run)])]
    runs = [found for found in every if found]
    here = every[0]
    held = sorted(p for p, r in here.items() if r is not None and all(f.get(p, r) is not None for f in runs))
    saved = [f"{p} B ({pct(1 - here[p])} less)" for p in held]  # type: ignore[operator]
    where = (f"in each of the {len(runs)} comparable runs that measured it" if len(runs) > 1
             else "in this run (the only comparable one that measured it)")
    advice = ("**Recommendation:** with payloads up to 1 KiB, set `hash-max-listpack-value 1024`: memory per "
              f"job drops beyond noise {where} for payloads of {', '.join(saved)}." if saved else
              f"No payload size uses less memory with the 1024 limit beyond noise {where}.")
    return (f"{server_label(ds, run, rows.iloc[0].server)}; B/job, median and spread (hash encoding of a "
            "sample job).\n\n"
            f"{md_table(table)}\n\nMemory for 1 million waiting jobs:\n\n{md_table(million)}\n\n"
            f"{chart(fig, 'memory')}\n\n{advice}")


def listpack_ratios(ds: Dataset, run: str, server: str) -> dict[int, float | None]:
    """Payload size -> memory ratio (1024 listpack limit over the default) where it is lower beyond
    noise, None where both limits were measured without such a saving, in one run on ``server``;
    payloads the run did not measure with both limits are absent."""
    rows = select(ds.summary, run_id=run, scenario="memory", metric="bytes_per_job", server=server,
                  protocol=3, parser="hiredis")
    found = versus(rows[rows.config == LISTPACK], rows[rows.config == "default"], "payload_bytes")
    return {int(p): (r if not n and r < 1 else None)
            for p, r, n in zip(found.payload_bytes, found.ratio, found.noise, strict=True)}


def aof_ratios(ds: Dataset, run: str) -> pd.DataFrame:
    """Throughput with each AOF mode over persistence off, per scenario and case, in one run."""
    out = [pd.DataFrame(columns=["scenario", "mode", "ratio", "lo", "hi", "noise"])]
    for scenario, name in AOF_SCENARIOS.items():
        rows = select(ds.summary, run_id=run, scenario=scenario, metric=name, protocol=3, parser="hiredis",
                      server=primary_server(ds, run, scenario))
        out += [versus(rows[rows.config == config], rows[rows.config == "default"], "case").assign(
            scenario=scenario, mode=mode) for config, mode in AOF.items()]
    return pd.concat(out, ignore_index=True)[["scenario", "mode", "ratio", "lo", "hi", "noise"]]


def persistence_section(ds: Dataset, prefix: str = "") -> str:
    """AOF everysec and always against persistence off, checked across comparable runs."""
    run = primary_run(ds, "process")
    found = aof_ratios(ds, run) if run else pd.DataFrame()
    if run is None or found.empty:
        return no_data("a persistence comparison (configurations `aof-everysec`, `aof-always`)")
    # only the comparable runs that measured an AOF comparison count (a failover-only run does not)
    candidates = dict.fromkeys([run, *same_method_runs(ds, run)])
    measured = [frame for frame in (aof_ratios(ds, r) for r in candidates) if not frame.empty]
    every = pd.concat(measured)
    rows, costs = [], []
    for (scenario, mode), part in found.groupby(["scenario", "mode"], sort=False):
        row, others = part.iloc[0], select(every, scenario=scenario, mode=mode)
        agree = len({change(o, "noise").split()[0] for _, o in others.iterrows()}) == 1
        spread = (f"{span(others.ratio.min(), others.ratio.max(), times)} over {len(others)} runs"
                  if len(others) > 1 else "one run")
        rows.append({"scenario": scenario, "mode": mode,
                     "vs off": ratio_text(row, noise=False),
                     "this run": change(row, "noise"),
                     "across runs": ("same verdict, " if agree else "**differs**, ") + spread})
        # the verdict holds in every run, the amount does not: the cost is the range over the runs
        low, high = 1 - others.ratio.max(), 1 - others.ratio.min()
        costs.append(f"costs {span(low, high, pct)} over {len(others)} runs "
                     f"({change(row, 'noise')} in this one)" if len(others) > 1
                     else f"{change(row, 'noise')} (one run)")
    table = pd.DataFrame(rows)
    costly = ~table["across runs"].str.startswith("**") & table["this run"].str.startswith("costs")
    advice = ("**In every comparable run that measured it:** " + "; ".join(
        f"{r['mode']} {cost} in {r.scenario}"
        for (_, r), cost, keep in zip(table.iterrows(), costs, costly, strict=True) if keep) + "."
        if costly.any() else "No AOF cost holds in every comparable run.")
    if table["this run"].str.startswith("gains").any():
        advice += (" AOF only adds work to each write: a row where it *gains* beyond the repetitions' "
                   "ranges shows how far the machine drifted between the two cells (measured minutes "
                   "apart), not a speed-up from AOF; read it as this run's noise floor.")
    fig = ratio_bars({mode: part.assign(point=part.scenario)
                      for mode, part in found.groupby("mode", sort=False)}, "Throughput with AOF",
                     "persistence off")
    return (f"{server_label(ds, run, primary_server(ds, run, 'process') or '')}; {len(measured)} "
            f"comparable run{'s' * (len(measured) != 1)} measured AOF.\n\n{md_table(table)}\n\n"
            f"{chart(fig, 'persistence')}\n\n{advice}\n\n{source(ds, run, prefix)}\n")


# What the maintenance charts' y axes count (a unit alone, "1/s", did not say).
AXIS_NAMES = {"items_per_s": "jobs promoted/s", "probe_p99_ms": "PING p99 (ms)"}


@scenario_section("maintenance", config="default")
def maintenance_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Batch size against promotion rate, sweep time and other clients' PING p99."""
    server = rows.iloc[0].server
    probes = [e.get("probe_samples") for e in extras(ds, rows)]
    rows = rows.assign(probes=[MISSING if p is None else p for p in probes])
    table = wide(ds, rows, ["backlog", "batch", "probes"], ["items_per_s", "sweep_p99_ms", "probe_p99_ms"])
    # a p99 of fewer than 100 samples is the slowest one or next to it: say so where it is shown
    table = table.rename(columns={"probes": "PING samples", "probe p99 (ms)": "PING p99 (ms)"})
    thin = [isinstance(p, int | float) and p < P99_SAMPLES for p in table["PING samples"]]
    table["PING p99 (ms)"] = [f"{c} †" if t else c for c, t in zip(table["PING p99 (ms)"], thin, strict=True)]
    few = any(thin)
    charts = metric_lines(rows, (("items_per_s", "Jobs promoted per second by batch"),
                                 ("probe_p99_ms", "Another client's PING p99 during sweeps"
                                  + (" (few samples: ≈ the slowest)" if few else ""))),
                          lambda name: f"maint-{name}", lambda name, _: AXIS_NAMES[name], x="batch",
                          series="backlog", x_title="maintenance_batch", name=lambda k: f"backlog {k:,}")
    # the lease sets how soon a crashed worker's jobs come due for the recovery these sweeps do
    settings = QueueSettings()
    default = defaults_note(ds, run, {"queue.maintenance_batch": settings.maintenance_batch,
                                      "queue.lease": settings.lease})
    least = min((p for p, t in zip(table["PING samples"], thin, strict=True) if t), default=0)
    caveat = (f"\n\n† Fewer than {P99_SAMPLES} PING samples (as few as {fmt(least)}): a p99 of so "
              "few is the slowest sample or next to it, so read it as the worst PING seen during the "
              "sweeps, not as a percentile." if few else "")
    return (f"{server_label(ds, run, server)}. {default}\n\n{md_table(table)}{caveat}\n\n"
            + "\n\n".join(charts))


PREFETCH = "_prefetch"  # the process scenario's prefetch case names its figures with this suffix
PREFETCH_METRICS = {"jobs_per_s": False, "client_cpu_us_per_job": True}  # metric -> lower is better


def _prefetch_pairs(ds: Dataset, run: str) -> pd.DataFrame:
    """Per server and metric, the prefetch case against the plain drain of the same concurrency and
    payload in ``run`` (``versus`` rows: ratio above 1 means prefetch is better)."""
    rows = select(ds.summary, run_id=run, scenario="process", **BASELINE)
    found = []
    for name, lower in PREFETCH_METRICS.items():
        ahead = rows[rows.metric == name + PREFETCH].assign(metric=name)
        plain = rows[rows.metric == name].drop(columns="prefetch", errors="ignore")
        pairs = versus(ahead, plain, ["server", "metric", "concurrency", "payload_bytes"], lower_better=lower)
        found.append(pairs)
    return pd.concat(found, ignore_index=True)


def _ratios(ratios: pd.Series) -> str:
    """`` (1.30x)`` or `` (1.30x to 1.40x)``; '' for none."""
    if ratios.empty:
        return ""
    low, high = times(ratios.min()), times(ratios.max())
    return f" ({low})" if low == high else f" ({low} to {high})"


def _prefetch_verdict(pairs: pd.DataFrame, cores: int) -> str:
    """What the run says about prefetch for short jobs, computed from its ratios."""
    said = []
    for name, what, less in (("client_cpu_us_per_job", "the worker's CPU per job", "cut"),
                             ("jobs_per_s", "the rate", "raised")):
        rows = pairs[pairs.metric == name]
        if rows.empty:  # a run without the worker's CPU figures
            continue
        better, worse = rows[~rows.noise & (rows.ratio > 1)], rows[~rows.noise & (rows.ratio < 1)]
        said.append(f"Prefetch {less} {what} beyond the noise on {len(better)} of {len(rows)} servers"
                    + _ratios(better.ratio)
                    + (f" and made it worse on {len(worse)}" if len(worse) else "") + ".")
    rates = pairs[pairs.metric == "jobs_per_s"]
    if not rates.empty and (~rates.noise & (rates.ratio > 1)).all():
        said.append("For jobs as short as these (no-op handlers; longer jobs were not measured), set "
                    "`prefetch` to the worker's concurrency.")
    else:
        said.append("The rate did not rise beyond the noise everywhere, so this page recommends no "
                    f"setting: on this {cores}-core machine the server and the worker take turns on the "
                    "same cores, and where the server runs on its own host the worker's CPU is what "
                    "prefetch saves. Measure yours: `nox -s bench -- --scenarios process`.")
    return " ".join(said)


def prefetch_run(ds: Dataset) -> str | None:
    """The run the prefetch section reads: the primary one among those with the prefetch case."""
    with_case = ds.summary[ds.summary.metric == "jobs_per_s" + PREFETCH]
    return primary_run(replace(ds, summary=with_case), "process")


def prefetch_section(ds: Dataset, prefix: str = "") -> str:
    """AsyncWorker with ``prefetch`` against the same drain without it: jobs/s and worker CPU per
    job, per server, with whiskers and the noise rule; a recommendation from the ratios."""
    run = prefetch_run(ds)
    pairs = _prefetch_pairs(ds, run) if run else pd.DataFrame()
    if pairs.empty:
        return no_data("the `process` case with `prefetch`")
    figures = {"jobs_per_s": "jobs/s", "client_cpu_us_per_job": "worker CPU per job (µs)"}
    first = pairs.iloc[0]  # one prefetch case per run (the scenario's ``prefetch`` option)
    ordered = pairs.sort_values("server", key=lambda c: c.map(server_rank), kind="stable")
    table = [{"server": server_label(ds, run, str(r.server)), "figure": figures[r.metric],
              "prefetch 0": stat_cell(r, "_base"), f"prefetch {fmt(first.prefetch)}": stat_cell(r),
              "ratio (whiskers)": ratio_text(r)} for _, r in ordered.iterrows()]
    return (f"One burst AsyncWorker at concurrency {fmt(first.concurrency)} draining no-op jobs of "
            f"{fmt(first.payload_bytes)} B, RESP3, hiredis, the same run: the drain without prefetch and "
            "the same drain with it, one after the other on each server. A ratio above 1x is better "
            "with prefetch (for CPU: less per job).\n\n"
            f"{md_table(pd.DataFrame(table))}\n\n{_prefetch_verdict(pairs, int(ds.runs.loc[run].cores))}"
            f"\n\n{source(ds, run, prefix)}\n")


def io_threads_note(ds: Dataset, prefix: str = "") -> str:
    """States the core counts behind the published results."""
    cores = sorted(set(ds.runs.cores))
    if not cores:
        return ""
    verdict = ("so this site publishes no io-threads figures." if max(cores) < 4 else
               "io-threads figures would need a run that sets `io-threads`; none does yet.")
    return (f"The result files on this site were measured on machines with {', '.join(map(str, cores))} "
            f"cores, {verdict}")


SECTIONS = {"memory_section": memory_section, "persistence_section": persistence_section,
            "maintenance_section": maintenance_section, "prefetch_section": prefetch_section,
            "io_threads_note": io_threads_note}
