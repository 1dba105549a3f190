"""High availability and scaling page: the ACL rules (from the library), scale-out, TLS and failover.

The ACL line is rendered from :func:`conveyor.acl_rules`, the same function the tests run a
least-privilege user with, so the page cannot drift from what is tested. Figures come from the
newest result file holding each scenario.
"""

from __future__ import annotations

import pandas as pd

from bench.report.common import stat_cell, wide
from bench.report.compare import change, ratio, ratio_text, select
from bench.report.load import Dataset
from bench.report.text import MISSING, fmt, md_table, no_data, source_line, wrapped

ONE_CALLER = {"jobs/s": "jobs_per_s", "p50 ms": "p50_ms", "p99 ms": "p99_ms"}


def acl_setup(ds: Dataset, prefix: str) -> str:
    """The ACL SETUSER commands for every queue under the default prefix, and for one queue; each is
    one line to copy, wrapped on screen instead of scrolling."""
    from conveyor import acl_rules  # noqa: PLC0415 (the docs environment installs the library)

    return (wrapped(f"ACL SETUSER conveyor on >CHANGE-ME {acl_rules()}")
            + "\nLimited to one queue (here `emails`, default prefix `cv`):\n\n"
            + wrapped(f"ACL SETUSER conveyor-emails on >CHANGE-ME {acl_rules(queue='emails')}"))


def newest(ds: Dataset, scenario: str, **where: object) -> tuple[str | None, pd.DataFrame]:
    """(run, summary rows) of the newest run holding ``scenario``."""
    held = ds.runs.run_id[ds.runs.run_id.isin(ds.summary.run_id[ds.summary.scenario == scenario])]
    run = str(held.iloc[-1]) if len(held) else None  # runs are sorted by time
    return run, select(ds.summary, run_id=run, scenario=scenario, **where)


def stat(rows: pd.DataFrame, metric: str) -> str:
    row = rows[rows.metric == metric]
    return MISSING if row.empty else stat_cell(row.iloc[0])


def table(ds: Dataset, prefix: str, scenario: str, by: str, columns: dict[str, str],
          **where: object) -> str:
    """One row per (server, ``by``) of the newest run's ``scenario`` rows: a column per metric."""
    run, rows = newest(ds, scenario, **where)
    if run is None or rows.empty:
        topology = f"'s {where['topology']} cases" if where else ""
        return no_data(f"the `{scenario}` scenario{topology}")
    labels = {m: label for label, m in columns.items()}
    shown = wide(ds, rows.assign(metric=rows.metric.map(labels), unit=""), ["server", by], list(columns))
    return md_table(shown.rename(columns={by.replace("_", " "): by}).fillna(MISSING)) + "\n\n" + source_line(
        ds.runs.loc[run], prefix)


def scale_out_table(ds: Dataset, prefix: str) -> str:
    """Jobs/s against the number of queues spread over the shards, with shard balance."""
    return table(ds, prefix, "scale-out", "queues", {
        "shards used": "shards_used", "jobs/s (median and spread)": "jobs_per_s",
        "shard balance (slowest / fastest)": "shard_balance"}, topology="cluster")


def durability_table(ds: Dataset, prefix: str) -> str:
    """Cost of wait_replicas on one caller enqueueing one job per call (primary + one replica)."""
    return table(ds, prefix, "scale-out", "wait_replicas", ONE_CALLER, topology="replicated")


def tls_table(ds: Dataset, prefix: str) -> str:
    """One caller through the plain port (0) and the TLS port (1), then TLS / plain per server."""
    lines = []
    for server, group in newest(ds, "tls", metric="jobs_per_s")[1].groupby("server", sort=True):
        plain, tls = group[group.tls == 0], group[group.tls == 1]
        if plain.empty or tls.empty:
            continue
        r = ratio(tls.iloc[0], plain.iloc[0])
        single = min(tls.iloc[0]["n"], plain.iloc[0]["n"]) < 2
        noise = "costs nothing beyond the noise"
        verdict = "one repetition: no spread to judge by" if single else f"TLS {change(r, noise)}"
        lines.append(f"- {server}: TLS / plain throughput {ratio_text(r, noise=False)}: {verdict}")
    return table(ds, prefix, "tls", "tls", ONE_CALLER) + ("\n\n" + "\n".join(lines) if lines else "")


def failover_table(ds: Dataset, prefix: str) -> str:
    """Jobs lost and run twice when the queue's primary is killed (totals over the repetitions, one
    kill each), then how long producers and workers took to carry on (medians); two tables, as one
    would not fit."""
    run, rows = newest(ds, "failover")
    if run is None or rows.empty:
        return no_data("the `failover` scenario")
    case = ["server", "topology", "fault", "wait_replicas"]
    reps = select(ds.frame, run_id=run, scenario="failover")
    totals = reps.pivot_table(index=case, columns="metric", values="value", aggfunc="sum")
    kills = reps[reps.metric == "lost"].groupby(case).rep.nunique()
    losses, recovery = [], []
    for (server, topology, fault, wait), group in rows.groupby(case, sort=True):
        key, n = (server, topology, fault, wait), int(kills[(server, topology, fault, wait)])
        counts = {label: fmt(float(totals.loc[key, m]), 0) for label, m in
                  (("acknowledged", "acknowledged"), ("lost", "lost"), ("ran twice", "ran_twice"))}
        losses.append({"server": server, "topology, fault": f"{topology}, {fault}, {n} kill" + "s" * (n != 1),
                       "wait_replicas": int(wait), **counts})
        recovery.append({"server": server, "topology": topology, "fault": fault, "wait_replicas": int(wait),
                         "enqueues back after (s)": stat(group, "enqueue_recovery_s"),
                         "worker back after (s)": stat(group, "run_recovery_s")})
    return "\n\n".join([md_table(pd.DataFrame(losses)), "Time from the kill until clients carried on:",
                        md_table(pd.DataFrame(recovery)), source_line(ds.runs.loc[run], prefix)])


SECTIONS = {"ha_failover_table": failover_table, "ha_acl_setup": acl_setup, "ha_scale_out_table":
            scale_out_table, "ha_durability_table": durability_table, "ha_tls_table": tls_table}
