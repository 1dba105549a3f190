"""High availability and scaling page: the ACL rules (from the library) and the scale-out results.

The ACL line is rendered from :func:`conveyor.acl_rules`, the same function the tests run a
least-privilege user with, so the page cannot drift from what is tested. Figures come only from
the newest result file holding the ``scale-out`` scenario.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd

from bench.report.compare import ratio, select
from bench.report.load import Dataset
from bench.report.text import fmt, fmt_stat, md_table, no_data, pct, source_line, span, times

SCENARIO = "scale-out"


def acl_setup(ds: Dataset, prefix: str) -> str:
    """The ACL SETUSER commands for every queue under the default prefix, and for one queue.

    Each command is one line to copy; the page wraps it visually instead of scrolling.
    """
    from conveyor import acl_rules  # noqa: PLC0415 (the docs environment installs the library)

    return (
        _wrapped(f"ACL SETUSER conveyor on >CHANGE-ME {acl_rules()}")
        + "\n\nLimited to one queue (here `emails`, default prefix `cv`):\n\n"
        + _wrapped(f"ACL SETUSER conveyor-emails on >CHANGE-ME {acl_rules(queue='emails')}")
    )


def _wrapped(command: str) -> str:
    style = "white-space: pre-wrap; overflow-wrap: anywhere"
    return f'<div class="highlight"><pre><code style="{style}">{html.escape(command)}</code></pre></div>'


def _rows(ds: Dataset, scenario: str, **where: object) -> tuple[pd.DataFrame, str | None]:
    run_id = ds.latest(scenario)
    if run_id is None:
        return ds.summary.iloc[0:0], None
    return select(ds.summary, run_id=run_id, scenario=scenario, **where), run_id


def _stat(rows: pd.DataFrame, metric: str) -> str:
    row = rows[rows.metric == metric]
    if row.empty:
        return "\N{EM DASH}"
    first = row.iloc[0]
    return fmt_stat(float(first["median"]), float(first["mad"]), int(first["n"]))


Column = Callable[[pd.DataFrame], str]


def _table(ds: Dataset, prefix: str, cases: tuple[str, str], by: str, columns: dict[str, Column]) -> str:
    """One row per (server, ``by``) of the newest run's ``cases``: (scenario, topology or '')."""
    scenario, topology = cases
    rows, run_id = _rows(ds, scenario, **({"topology": topology} if topology else {}))
    if run_id is None or rows.empty:
        return no_data(f"the `{scenario}` scenario" + (f"'s {topology} cases" if topology else ""))
    table = [
        {"server": server, by: int(key), **{label: column(group) for label, column in columns.items()}}
        for (server, key), group in rows.groupby(["server", by], sort=True)
    ]
    return md_table(pd.DataFrame(table)) + "\n\n" + source_line(ds.run(run_id), prefix)


ONE_CALLER: dict[str, Column] = {
    "jobs/s": lambda g: _stat(g, "jobs_per_s"),
    "p50 ms": lambda g: _stat(g, "p50_ms"),
    "p99 ms": lambda g: _stat(g, "p99_ms"),
}


def _shards(group: pd.DataFrame) -> str:
    return fmt(float(group[group.metric == "shards_used"]["median"].iloc[0]), 0)


def scale_out_table(ds: Dataset, prefix: str) -> str:
    """Jobs/s against the number of queues spread over the shards, with shard balance."""
    return _table(ds, prefix, (SCENARIO, "cluster"), "queues", {
        "shards used": _shards,
        "jobs/s (median ± MAD)": lambda g: _stat(g, "jobs_per_s"),
        "shard balance (slowest / fastest)": lambda g: _stat(g, "shard_balance"),
    })  # fmt: skip


def durability_table(ds: Dataset, prefix: str) -> str:
    """Cost of wait_replicas on one caller enqueueing one job per call (primary + one replica)."""
    return _table(ds, prefix, (SCENARIO, "replicated"), "wait_replicas", ONE_CALLER)


def tls_table(ds: Dataset, prefix: str) -> str:
    """One caller enqueueing one job per call through the plain port (0) and the TLS port (1),
    then the ratio of the two throughputs per server (the same server, the same run)."""
    table = _table(ds, prefix, ("tls", ""), "tls", ONE_CALLER)
    rows, _ = _rows(ds, "tls", metric="jobs_per_s")
    lines = []
    for server, group in rows.groupby("server", sort=True):
        plain, tls = group[group.tls == 0], group[group.tls == 1]
        if plain.empty or tls.empty:
            continue
        r = ratio(tls.iloc[0], plain.iloc[0])
        cost = f"TLS costs {pct(1 - float(r['ratio']))} of the throughput"
        single = min(int(tls.iloc[0]["n"]), int(plain.iloc[0]["n"])) < 2
        verdict = ("one repetition: no spread to judge the difference by" if single
                   else "the difference is within the noise" if r["noise"] else cost)  # fmt: skip
        lines.append(f"- {server}: TLS / plain throughput {times(float(r['ratio']))} "
                     f"(repetitions span {span(float(r['lo']), float(r['hi']))}): {verdict}")
    return table + ("\n\n" + "\n".join(lines) if lines else "")


FAILOVER_CASE = ["topology", "fault", "wait_replicas"]
FAILOVER_COUNTS = {"acknowledged": "acknowledged", "lost": "lost", "ran twice": "ran_twice"}


def failover_table(ds: Dataset, prefix: str) -> str:
    """Jobs lost and run twice when the queue's primary is killed, with and without wait_replicas,
    then how long producers and workers took to carry on (two tables: one would not fit).
    ``kill, 3 kills``: the fault, and how many primaries were killed (one per repetition).

    Counts are totals over the repetitions (each kills one primary); recovery times are medians.
    """
    rows, run_id = _rows(ds, "failover")
    if run_id is None or rows.empty:
        return no_data("the `failover` scenario")
    frame = select(ds.frame, run_id=run_id, scenario="failover")
    losses, recovery = [], []
    for (server, topology, fault, wait), group in rows.groupby(["server", *FAILOVER_CASE], sort=True):
        case = {"server": server, "topology": topology, "fault": fault, "wait_replicas": int(wait)}
        reps = select(frame, server=server, topology=topology, fault=fault, wait_replicas=wait)
        totals = {label: fmt(float(reps[reps.metric == m]["value"].sum()), 0)
                  for label, m in FAILOVER_COUNTS.items()}  # fmt: skip
        kills = int(reps[reps.metric == "lost"]["rep"].nunique())
        cell = f"{topology}, {fault}, {kills} kill" + ("s" if kills != 1 else "")
        losses.append({"server": server, "topology, fault": cell, "wait_replicas": int(wait), **totals})
        recovery.append({**case, "enqueues back after (s)": _stat(group, "enqueue_recovery_s"),
                         "worker back after (s)": _stat(group, "run_recovery_s")})  # fmt: skip
    source = source_line(ds.run(run_id), prefix)
    return "\n\n".join([md_table(pd.DataFrame(losses)), "Time from the kill until clients carried on:",
                         md_table(pd.DataFrame(recovery)), source])


SECTIONS = {
    "ha_failover_table": failover_table,
    "ha_acl_setup": acl_setup,
    "ha_scale_out_table": scale_out_table,
    "ha_durability_table": durability_table,
    "ha_tls_table": tls_table,
}
