"""Performance page, first half: reference ceilings, enqueue, process, the call ceiling, client CPU."""

from __future__ import annotations

import pandas as pd

from bench.report.common import (
    by_run,
    machine,
    primary_run,
    primary_server,
    run_rows,
    scenario_section,
    server_label,
    server_rank,
    source,
    stat_cell,
    variant,
    wide,
)
from bench.report.compare import BASELINE, ratio_text, select, versus
from bench.report.figures import chart, plot
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, metric_label, no_data, params_text

COMMANDS = {"ping": "PING", "evalsha": "EVALSHA of return 1"}
CPU_METRIC = "client_cpu_us_per_job"
CPU_SCENARIOS = (("enqueue-single", "`enqueue`, one job per call", ("callers", "batching")),
                 ("enqueue-bulk", "`enqueue_many`", ("batch", "producers")),
                 ("process", "AsyncWorker draining a backlog", ("concurrency",)))


@scenario_section("reference", **BASELINE)
def reference_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """PING and EVALSHA per second, one at a time, concurrent and pipelined."""
    parts = rows.metric.str.extract(r"^(ping|evalsha)_(c1|cN|pipelined)_ops_per_s$")
    first = rows.iloc[0]
    modes = {"c1": "1 call at a time", "cN": f"{first.concurrency} concurrent callers",
             "pipelined": f"pipelines of {first.pipeline}"}
    rows = rows.assign(command=parts[0].map(COMMANDS), mode=parts[1].map(modes)).dropna(subset=["command"])
    table = wide(ds, rows.assign(metric=rows["mode"], unit="calls/s"), ["command"], list(modes.values()))
    order = rows.assign(at=pd.Categorical(rows["mode"], list(modes.values()), ordered=True)).sort_values("at")
    fig = plot(order, "mode", "command", str, title="Client and server ceilings, no Conveyor",
               x_title="how calls are made", y_title="calls/s", sort=False, category_x=True)
    return (f"On {server_label(ds, run, first.server)}, RESP3, hiredis; calls per second.\n\n"
            f"{md_table(table)}\n\n{chart(fig, 'reference')}")


def variants(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a ``variant`` column (what differs from the baseline), the baseline first."""
    labels = [variant(r) for _, r in rows.iterrows()]
    order = sorted(set(labels), key=lambda v: (v != "baseline", v))
    return rows.assign(variant=pd.Categorical(labels, categories=order, ordered=True))


def enqueue_section(ds: Dataset, prefix: str = "") -> str:
    """One job per call and ``enqueue_many``: separate tables and charts, each row labelled by what
    differs from the baseline (variant, callers and batching; producers)."""
    parts = [found for found in (single_part(ds), bulk_part(ds)) if found]
    if not parts:
        return no_data("the `enqueue-single` or `enqueue-bulk` scenario")
    if len({run for run, _ in parts}) > 1:  # each part names its own run (and machine)
        return "\n\n".join(f"{text}\n\n{source(ds, run, prefix)}" for run, text in parts) + "\n"
    return "\n\n".join(text for _, text in parts) + f"\n\n{source(ds, parts[-1][0], prefix)}\n"


ON_OFF = {True: "on", False: "off"}  # how the batching parameter reads in tables and legends
SWEEP_SKIP = ("callers", "batching", "min_seconds", "sweep_seconds", "jobs")


def single_part(ds: Dataset) -> tuple[str, str] | None:
    """``enqueue``: the table of every case, the callers sweep (batching off and on) and the
    variants at one caller, each on its own chart."""
    found = run_rows(ds, "enqueue-single")
    if found is None:
        return None
    run, rows = found
    rows = variants(rows)
    if "callers" not in rows:  # files from before the sweep measured one caller, no batching
        rows = rows.assign(callers=1, batching=False)
    rows = rows.assign(callers=rows.callers.fillna(1), batching=rows.batching.fillna(False).map(ON_OFF))
    rows = rows.assign(calls=[f"{n}, {b}" for n, b in zip(rows.callers, rows.batching, strict=True)])
    table = wide(ds, rows, ["variant", "callers", "calls"], ["jobs_per_s", "p50_ms", "p99_ms"], once=True)
    table = table.drop(columns="callers").rename(columns={"calls": "callers, batching"})
    rates = rows[rows.metric == "jobs_per_s"]
    sweep = rates[rates.variant == "baseline"]
    charts = [chart(plot(sweep, "callers", "batching", lambda b: f"batching {b}", category_x=True,
                         title="One job per call: jobs/s by concurrent callers (baseline)",
                         x_title="concurrent callers (asyncio tasks; 1: a sync Queue)",
                         y_title="jobs/s"), "enqueue-single")]
    lone = rates[(rates.callers == 1) & (rates.batching == "off")]
    if lone.variant.nunique() > 1:
        charts.append(chart(plot(lone, "variant", None, lambda _: "1 caller, batching off", category_x=True,
                                 title="One job per call: jobs/s by variant, one caller",
                                 x_title="variant (one thing changed from the baseline)", y_title="jobs/s"),
                            "enqueue-single-variants"))
    first = ds.cases[(ds.cases.run_id == run) & (ds.cases.scenario == "enqueue-single")].iloc[0]
    text = (f"### One job per call (`enqueue`)\n\n{server_label(ds, run, rows.iloc[0].server)}, "
            f"{params_text(first.params, skip=SWEEP_SKIP)}; latency per call.\n\n{ceilings_note(ds, run)}"
            f"{md_table(table)}\n\n"
            + "\n\n".join(charts) + ping_floor(ds, run))
    return run, text


def ceilings_note(ds: Dataset, run: str) -> str:
    """Where the one-job-per-call rates do not come from the reference ceilings' run: say so, with
    both runs' machines, since the page reads queue figures as a fraction of those ceilings (a
    faster host's enqueue then read as faster than the other host's bare PING)."""
    ref = run_rows(ds, "reference", **BASELINE)
    if ref is None or ref[0] == run:
        return ""
    beside = select(ds.summary, run_id=run, scenario="enqueue-single", metric="vs_ping_held")
    against = ("against the PINGs measured beside them in the same cases (below)" if len(beside)
               else "against no figure of that run")
    return (f"Measured in run `{run}` ({machine(ds, run)}), not in the run of the reference ceilings "
            f"above (`{ref[0]}`, {machine(ds, ref[0])}): read these rates {against}, not against the "
            "reference ceilings.\n\n")


def bulk_part(ds: Dataset) -> tuple[str, str] | None:
    """``enqueue_many``: a table and a chart by variant, a trace per producer count."""
    found = run_rows(ds, "enqueue-bulk")
    if found is None:
        return None
    run, rows = found
    # files from before the producers parameter measured one producer
    rows = variants(rows.assign(producers=rows.get("producers", pd.Series(1, rows.index)).fillna(1)))
    table = wide(ds, rows, ["variant", "producers"], ["jobs_per_s", "p50_ms", "p99_ms"], once=True)
    first = ds.cases[(ds.cases.run_id == run) & (ds.cases.scenario == "enqueue-bulk")].iloc[0]
    fig = plot(rows[rows.metric == "jobs_per_s"], "variant", "producers",
               lambda n: f"{n} producer{'s' if n != 1 else ''}", title="In batches: jobs/s by variant",
               category_x=True, x_title="variant (one thing changed from the baseline)", y_title="jobs/s")
    return run, (f"### In batches (`enqueue_many`)\n\n{server_label(ds, run, rows.iloc[0].server)}, "
                 f"{params_text(first.params, skip=('producers', 'jobs'))}; latency per batch.\n\n"
                 f"{md_table(table)}\n\n{chart(fig, 'enqueue-bulk')}")


PING_FLOOR = {"jobs_per_s": "enqueue (jobs/s)", "ping_client_ops_per_s": "client.ping() (calls/s)",
              "vs_ping_client": "enqueue ÷ client.ping()", "ping_held_ops_per_s": "PING, held (calls/s)",
              "vs_ping_held": "enqueue ÷ PING held", "set_held_ops_per_s": "SET, held (calls/s)",
              "set_held_vs_ping_held": "SET held ÷ PING held"}


def ping_floor(ds: Dataset, run: str) -> str:
    """A lone caller's enqueue rate over bare PINGs on the same connection, measured in the same
    case just before and after it, per server (runs from before that measurement: nothing)."""
    rows = select(ds.summary, run_id=run, scenario="enqueue-single", callers=1, **BASELINE)
    if "vs_ping_held" not in set(rows.metric):
        return ""
    rows = rows[rows.server.isin(rows[rows.metric == "vs_ping_held"].server)]
    rows = rows.assign(server=pd.Categorical(rows.server, sorted(rows.server.unique(), key=server_rank),
                                             ordered=True),
                       batching=rows.batching.map(ON_OFF))
    units = dict(zip(rows.metric, rows.unit, strict=False))
    labels = {metric_label(m, units.get(m, "")): label for m, label in PING_FLOOR.items()}
    rates, ratios = ([m for m in PING_FLOOR if ("vs_" in m) == want] for want in (False, True))
    tables = [md_table(wide(ds, rows, ["server", "batching"], part).rename(columns=labels))
              for part in (ratios, rates)]
    return ("\n\n#### One enqueue per call against a bare PING\n\nThe lone caller above, on every "
            "server, next to bare `PING`s sent one at a time on the same client, two ways: "
            "`client.ping()` (redis-py's usual path, a pool checkout per call, as the reference "
            "ceilings) and on one connection of the pool held for the whole loop (the round-trip floor; "
            "a lone enqueue with batching on also holds its connection). Each way runs for a quarter of "
            "the case's time just before the enqueue calls and a quarter just after, so both sides see "
            "the same machine. A ratio is the median of the repetitions' own ratios; 1 would be a "
            "script call as cheap as a PING. Where measured, one plain write sent the same way, a `SET` "
            "of the same payload to one key on the held connection after each bracket's PINGs, shows what "
            "a single write costs against a PING (an enqueue writes three keys in one script call: the "
            "id counter, the job's hash and the waiting list). The rates behind the ratios follow.\n\n"
            + "\n\n".join(tables) + "\n\n")


@scenario_section("process")
def process_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """A burst worker draining a pre-filled queue: by concurrency, then by variant."""
    base = select(rows, **BASELINE)
    first = base.iloc[0]
    table = wide(ds, base, ["concurrency"], ["jobs_per_s", "elapsed_s"], once=True)
    fig = plot(base[base.metric == "jobs_per_s"], "concurrency", None,
               lambda _: f"baseline, payload {first.payload_bytes} B", lines=True,
               title="Draining a backlog: jobs/s by worker concurrency",
               x_title="worker concurrency (handlers at once)", y_title="jobs/s")
    others = variants(rows[rows.metric == "jobs_per_s"])
    point = others[others.variant != "baseline"]
    text = "" if point.empty else (
        f"\n\nOne thing changed at a time, at concurrency {point.iloc[0].concurrency}:\n\n"
        + md_table(wide(ds, others[others.case == point.iloc[0].case], ["variant"], ["jobs_per_s"])))
    return (f"{server_label(ds, run, first.server)}, RESP3, hiredis, jobs of {first.payload_bytes} B.\n\n"
            f"{md_table(table)}\n\n{chart(fig, 'process')}{text}")


def ceiling_section(ds: Dataset, prefix: str = "") -> str:
    """Jobs/s against the EVALSHA calls/s of the same server at the same concurrency."""
    run = primary_run(ds, "process")
    ref = select(ds.summary, run_id=run, scenario="reference", metric="evalsha_cN_ops_per_s", **BASELINE)
    proc = select(ds.summary, run_id=run, scenario="process", metric="jobs_per_s", **BASELINE)
    # each figure with its spread, the ratio with its whiskers (worst to best pairing of repetitions)
    both = versus(proc, ref, ["server", "concurrency"]) if len(ref) else ref
    if both.empty:
        return no_data("process and reference rows at the same concurrency in one run")
    rows = [r for _, r in both.iterrows()]
    table = pd.DataFrame({"server": both.server, "concurrency": both.concurrency,
                          "jobs/s (process)": [stat_cell(r) for r in rows],
                          "EVALSHA calls/s": [stat_cell(r, "_base") for r in rows],
                          "jobs/s ÷ EVALSHA calls/s": [ratio_text(r, noise=False) for r in rows]})
    return f"{md_table(table)}\n\n{source(ds, str(run), prefix)}\n"


def per_core(row: pd.Series) -> pd.Series:
    """Jobs/s one client core could sustain, 1e6 / (µs per job), with its spread: the range maps to
    1e6 / max .. 1e6 / min, the MAD to about MAD / median of the rate (first order)."""
    median = float(row["median"])
    return pd.Series({"median": 1e6 / median, "mad": 1e6 * float(row.get("mad") or 0) / median ** 2,
                      "n": row["n"], "min": 1e6 / float(row["max"]), "max": 1e6 / float(row["min"])})


def client_cpu_section(ds: Dataset, prefix: str = "") -> str:
    """CPU time of the producer or worker process per job, beside the rate of the same case."""
    table, runs = [], []
    for scenario, title, keys in CPU_SCENARIOS:
        found = run_rows(ds, scenario, CPU_METRIC, **BASELINE)
        if found is None:
            continue
        run, rows = found
        server = rows.server.iloc[0]
        rates = rows[rows.metric == "jobs_per_s"].set_index("case")
        for _, row in rows[rows.metric == CPU_METRIC].iterrows():
            case = ", ".join(f"{k} {('on' if v else 'off') if isinstance(v, bool) else fmt(v)}"
                             for k in keys if (v := row.get(k)) is not None and not pd.isna(v))
            table.append({"scenario": title, "case": case or "default", "server": server, "run": run,
                          "client CPU per job (µs)": stat_cell(row),
                          "jobs/s": stat_cell(rates.loc[row.case] if row.case in rates.index else None),
                          "jobs/s one client core could sustain": stat_cell(per_core(row))})
        runs.append(run)
    if not table:
        return no_data(f"the client CPU per job (`{CPU_METRIC}`)")
    # rows of several runs (each scenario's newest full one) say which run each came from
    frame, note = by_run(pd.DataFrame(table))
    sources = "\n\n".join(source(ds, r, prefix) for r in dict.fromkeys(runs))
    return f"{note}{md_table(frame)}\n\n{sources}\n"


def features_section(ds: Dataset, prefix: str = "") -> str:
    """``process`` with priorities, a limit key and hooks on, against the same run's baseline."""
    run = primary_run(ds, "process")
    server = primary_server(ds, run, "process") if run else None
    where = {"run_id": run, "scenario": "process", "server": server, "metric": "jobs_per_s", **BASELINE}
    same = ["concurrency", "payload_bytes"]
    found = versus(select(ds.featured, **where), select(ds.summary, **where), same) if run else pd.DataFrame()
    if found.empty:
        return no_data("the `process` case with priorities, a limit key and hooks on")
    table = pd.DataFrame({
        "features on": found.features.astype(str), "concurrency": found.concurrency.astype(str),
        "jobs/s, none used": [stat_cell(r, "_base") for _, r in found.iterrows()],
        "jobs/s, features on": [stat_cell(r) for _, r in found.iterrows()],
        "ratio (whiskers)": [ratio_text(r) for _, r in found.iterrows()]})
    return (f"{server_label(ds, str(run), str(server))}, RESP3, hiredis, same run, same concurrency.\n\n"
            f"{md_table(table)}\n\n{source(ds, str(run), prefix)}\n")


SECTIONS = {"reference_section": reference_section, "enqueue_section": enqueue_section,
            "process_section": process_section, "ceiling_section": ceiling_section,
            "client_cpu_section": client_cpu_section, "features_section": features_section}
