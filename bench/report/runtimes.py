"""Runtimes and drivers page: each interpreter, event loop and client driver as a ratio to the baseline.

The baseline is redis-py (with hiredis) on CPython 3.11 with the standard asyncio loop. An option differs
from it in one dimension; its cells are like-for-like ratios on the same server (configuration
``default``, RESP3, the same case parameters), taken from the option's newest run on that server and
paired with the same run when it holds both, else with the baseline run nearest in time on the same
machine (the commands measure the baseline before and after the options). Options without data name
the command that measures them; the recommendation is computed from the ratios, never typed.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bench.report.common import DEFAULT_PYTHON, server_rank
from bench.report.compare import THRESHOLD, versus
from bench.report.figures import chart, plot
from bench.report.load import Dataset
from bench.report.text import cell, md_table, times

# The scenarios compared and the metric each is judged by (True: lower is better).
SCENARIOS = {"reference": ("evalsha_cN_ops_per_s", False), "enqueue-single": ("jobs_per_s", False),
             "enqueue-bulk": ("jobs_per_s", False), "process": ("jobs_per_s", False),
             "latency": ("p99_ms", True)}
SERVERS = ("valkey-9.1", "redis-8.2")  # the servers the commands below measure, the page's scope
BENCH = (f"--scenarios {','.join(SCENARIOS)} --servers {','.join(SERVERS)} --configs default "
         "--protocols 3 --parsers hiredis --repetitions 3")
DRIVERS = {"redis-py": "redis-py + hiredis", "redis-py-pure": "redis-py, pure-Python parser",
           "glide": "valkey-glide"}


AGAIN = "baseline again (drift)"
BASELINE_PYTHON = DEFAULT_PYTHON


class Option(NamedTuple):
    """One interpreter/loop/driver combination and the extra arguments that measure it."""

    python: str
    loop: str = "asyncio"
    driver: str = "redis-py"
    args: str = ""

    @property
    def short(self) -> str:
        return f"{self.python} · {self.loop} · {DRIVERS[self.driver]}"

    @property
    def differs(self) -> str:
        """The one dimension in which the option differs from the baseline (a ratio column)."""
        parts = [f"CPython {self.python}" if self.python != BASELINE_PYTHON else "",
                 self.loop if self.loop != "asyncio" else "",
                 DRIVERS[self.driver] if self.driver != "redis-py" else ""]
        return " · ".join(p for p in parts if p) or "baseline"

    @property
    def label(self) -> str:
        return f"CPython {self.short}"

    @property
    def command(self) -> str:
        """The run that measures this option."""
        pure = self.driver == "redis-py-pure"  # the pure-Python parser whatever --parsers says: name it
        bench = BENCH.replace("--parsers hiredis", "--parsers python") if pure else BENCH
        return f"nox -s bench_python-{self.python} -- {bench}{self.args}"


# uvloop and glide run as twins of the baseline's cases in its own run (bench --beside): each
# case back to back with its baseline case, so the drift between runs cannot enter their ratios.
# An interpreter, or redis-py's parser (chosen at import), needs a process and so a run of its own.
WITH_TWINS = " --beside uvloop,glide"
BASELINE = Option(BASELINE_PYTHON, args=WITH_TWINS)
OPTIONS = (BASELINE, Option("3.12"), Option("3.13"), Option("3.11", "uvloop", args=WITH_TWINS),
           Option("3.11", driver="redis-py-pure", args=" --driver redis-py-pure"),
           Option("3.11", driver="glide", args=WITH_TWINS))
# The runs that measure the options, in order (an option's status names the number of its run).
COMMANDS = tuple(dict.fromkeys(o.command for o in OPTIONS))


def command_number(option: Option) -> int:
    """The number of the command (below the page's table) that measures ``option``."""
    return COMMANDS.index(option.command) + 1
# Each driver's Cluster, Sentinel and TLS through Conveyor, and its packages (their notes: runtimes.md).
TRADE_OFFS = {"redis-py": ("yes", "yes", "yes", ("redis", "hiredis")),
              "redis-py-pure": ("yes", "yes", "yes", ("redis",)),
              "glide": ("not yet in Conveyor", "no", "yes", ("valkey-glide", "valkey-glide-sync"))}


def tagged(ds: Dataset) -> pd.DataFrame:
    """Summary rows of the compared metrics with the option (python, loop, driver) and a case key."""
    summary = ds.summary
    wanted = [summary[(summary.scenario == s) & (summary.metric == m)] for s, (m, _) in SCENARIOS.items()]
    rows = pd.concat([ds.summary.iloc[0:0], *wanted])
    rows = rows[(rows.config == "default") & (rows.protocol == 3)]
    params = [json.loads(c) for c in rows.case]
    runs = ds.runs.loc[rows.run_id]
    return rows.assign(
        option=[Option(".".join(d["environment"]["python"].split(".")[:2]), p.get("loop", "asyncio"),
                       p.get("driver") or ("redis-py-pure" if x == "python" else "redis-py")).short
                for d, p, x in zip(runs.doc, params, rows.parser, strict=True)],
        key=[json.dumps({k: v for k, v in p.items() if k not in ("loop", "driver")}, sort_keys=True)
             for p in params],
        # the host, not its label alone: every VM here is labelled 'vm', whatever its CPU
        machine=[f"{m} ({c}, {n} cores)" for m, c, n in zip(runs.machine, runs.cpu, runs.cores, strict=True)],
        created=runs.created.tolist())


def scoped(ds: Dataset) -> pd.DataFrame:
    """The tagged rows on the servers the commands measure."""
    rows = tagged(ds)
    return rows[rows.server.isin(SERVERS)]


def newest_run(rows: pd.DataFrame) -> str:
    """The newest run of ``rows`` (one option on one server) that measured every compared
    scenario, so a later run of a few of them (``--scenarios enqueue-single``) never replaces a
    full one; the newest of all while none is full (its status then names what is missing)."""
    counts = rows.groupby("run_id").scenario.nunique()
    full = rows[rows.run_id.isin(counts[counts == len(SCENARIOS)].index)]
    return str((rows if full.empty else full).sort_values(["created", "run_id"]).run_id.iloc[-1])


def pairs_of(mine: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """One option's rows from its newest run on a server, each paired with the baseline case of the
    same key: from the same run when it holds both, else from the baseline run nearest in time on
    the same machine (older runs of the option are left out: their cases may have other params)."""
    pairs = versus(mine[mine.run_id == newest_run(mine)], base, ["server", "scenario", "key", "machine"])
    gap = (pd.to_datetime(pairs.created) - pd.to_datetime(pairs.created_base)).abs()
    pairs = pairs.assign(same=pairs.run_id == pairs.run_id_base, gap=gap)
    pairs = pairs.sort_values(["same", "gap"], ascending=[False, True]).groupby(["scenario", "key"]).head(1)
    return pairs[(pairs["median"] > 0) & (pairs.median_base > 0)]


def summed(pairs: pd.DataFrame) -> dict[str, Any]:
    """Geometric-mean ratio and noise per scenario of paired cases, and the runs they pair."""
    lower = pairs.scenario.map(lambda s: SCENARIOS[s][1]).astype(bool)
    logs = np.log(pairs.ratio).where(~lower, -np.log(pairs.ratio))
    # whiskers: the same mean over each case's worst and best pairing of repetitions
    worst = np.log(pairs.lo).where(~lower, -np.log(pairs.hi))
    best = np.log(pairs.hi).where(~lower, -np.log(pairs.lo))
    per = pairs.assign(log=logs, worst=worst, best=best).groupby("scenario")
    ratio = np.exp(per.log.mean())
    noise = per.noise.all() | ((ratio - 1).abs() <= THRESHOLD)
    return {"ratios": ratio.to_dict(), "noise": noise.to_dict(),
            "spread": {s: (float(np.exp(lo)), float(np.exp(hi)))
                       for s, lo, hi in zip(ratio.index, per.worst.mean(), per.best.mean(), strict=True)},
            "run": pairs.run_id.iloc[0], "base": sorted(set(pairs.run_id_base)),
            "same_run": bool(pairs.same.all()),
            "minutes": float(pairs.gap.max().total_seconds() / 60)}


def drift(ds: Dataset) -> dict[str, dict[str, Any]]:
    """The baseline's drift per server (:func:`measure_drift`), computed once per dataset: the
    table, chart, recommendation and ratios all read it. Callers must not change it."""
    return ds.memo(("runtimes.drift",), lambda: measure_drift(ds))


def measure_drift(ds: Dataset) -> dict[str, dict[str, Any]]:
    """Per server: the baseline measured more than once, the run-to-run drift an option's ratio
    must exceed. The runs compared: the newest baseline run, the one nearest to it, and every
    baseline run an option measured in a run of its own is paired with; each scenario shows the
    two of them that differ most (an option paired with a slow baseline run reads fast). Only runs
    of one commit on one host are compared: between commits the code changed, between hosts
    the machine, and neither is the run-to-run drift an option must exceed."""
    rows = scoped(ds)
    commit = ds.runs.commit
    base = rows[rows.option == BASELINE.short]
    partners = partner_runs(rows, base)
    out = {}
    for server in sorted(base.server.unique(), key=server_rank):
        mine = base[base.server == server]
        newest = newest_run(mine)
        nearest = pairs_of(mine, base[base.run_id != newest]).run_id_base
        runs = mine[mine.run_id.isin({newest, *nearest, *partners.get(server, ())})]
        order = runs.sort_values(["created", "run_id"]).run_id.unique().tolist()
        found = [summed(p) for i, older in enumerate(order) for newer in order[i + 1:]
                 if commit[newer] and commit[newer] == commit[older]  # unknown commits never match
                 if not (p := pairs_of(runs[runs.run_id == newer], runs[runs.run_id == older])).empty]
        if found:
            out[server] = widest(found)
    return out


def partner_runs(rows: pd.DataFrame, base: pd.DataFrame) -> dict[str, set[str]]:
    """Per server: the baseline runs that options measured in runs of their own are paired with."""
    out: dict[str, set[str]] = {}
    for option in OPTIONS[1:]:
        mine = rows[rows.option == option.short]
        for server in mine.server.unique():
            pairs = pairs_of(mine[mine.server == server], base)
            out.setdefault(server, set()).update(pairs.run_id_base[~pairs.same])
    return out


def widest(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Per scenario, the pair of baseline runs (summed()) whose ratio stands furthest from 1."""
    scenarios = {s for f in found for s in f["ratios"]}
    pick = {s: max((f for f in found if s in f["ratios"]), key=lambda f, s=s: abs(np.log(f["ratios"][s])))
            for s in scenarios}
    runs = {r for f in found for r in (f["run"], *f["base"])}
    newest = max(runs)  # run ids start with their UTC time
    return {"ratios": {s: f["ratios"][s] for s, f in pick.items()},
            "noise": {s: f["noise"][s] for s, f in pick.items()},
            "spread": {s: f["spread"][s] for s, f in pick.items()},
            "run": newest, "base": sorted(runs - {newest}), "same_run": False,
            "minutes": max(f["minutes"] for f in found)}


def ratios(ds: Dataset) -> dict[Option, dict[str, dict[str, Any]]]:
    """The options' ratios (:func:`measure_ratios`), computed once per dataset: the table, chart,
    recommendation and methodology pages all read them. Callers must not change them."""
    return ds.memo(("runtimes.ratios",), lambda: measure_ratios(ds))


def measure_ratios(ds: Dataset) -> dict[Option, dict[str, dict[str, Any]]]:
    """Per option and server (display order): the geometric-mean ratio per scenario (above 1:
    better), whether each is noise (within ±10%, the repetitions' ranges, or no further from 1
    than the baseline's own drift), the option's run and the baseline runs it is paired with."""
    rows = scoped(ds)
    base = rows[rows.option == BASELINE.short]
    moved = {server: v["ratios"] for server, v in drift(ds).items()}
    out: dict[Option, dict[str, dict[str, Any]]] = {}
    for option in OPTIONS:
        mine = rows[rows.option == option.short]
        for server in sorted(mine.server.unique(), key=server_rank):
            pairs = pairs_of(mine[mine.server == server], base)
            if pairs.empty:
                continue
            got = out.setdefault(option, {})[server] = summed(pairs)
            if option != BASELINE and not got["same_run"]:  # twins in one run do not drift apart
                for s, r in got["ratios"].items():
                    got["noise"][s] |= abs(np.log(r)) <= abs(np.log(moved.get(server, {}).get(s, 1.0)))
    return out


def short_id(run_id: str) -> str:
    """A run's id as the status table shows it: the suffix after the timestamp."""
    return run_id.rsplit("-", 1)[-1]


def status_rows(option: Option, found: dict[str, dict[str, Any]] | None, number: int) -> list[dict[str, str]]:
    """Per server an option is measured on: its run, the baseline runs paired with it (and how far
    apart they started), the scenarios still missing; one "not measured yet" row when it has none."""
    name = option.short + (" (baseline)" if option == BASELINE else "")
    if not found:
        return [{"CPython · loop · driver": name, "server": "—", "runs": "—",
                 "status": f"not measured yet: command {number} below"}]
    rows = []
    for server, v in found.items():
        absent = [s for s in SCENARIOS if s not in v["ratios"]]
        runs = short_id(v["run"]) if v["base"] == [v["run"]] else (
            f"{short_id(v['run'])} vs {', '.join(map(short_id, v['base']))} ({v['minutes']:.0f} min apart)")
        missing = f"not measured yet: {', '.join(absent)} (— below)" if absent else "measured"
        rows.append({"CPython · loop · driver": name, "server": server, "runs": runs, "status": missing})
    return rows


def runtimes_table(ds: Dataset, prefix: str = "") -> str:
    """Which options are measured (and from which runs), then one row per scenario and server and
    one column per measured option."""
    found = ratios(ds)
    again = drift(ds)
    runs = {o: (again or found.get(o)) if o == BASELINE else found.get(o) for o in OPTIONS}
    listed = pd.DataFrame([row for o in OPTIONS for row in status_rows(o, runs[o], command_number(o))])
    measured = [o for o in OPTIONS if o in found and o != BASELINE]
    servers = sorted({s for o in measured for s in found[o]}, key=server_rank)

    def shown(v: dict[str, Any] | None, scenario: str) -> str:
        if v is None or (r := v["ratios"].get(scenario)) is None:
            return "—"
        return times(r) + (" (noise)" if v["noise"][scenario] else "")

    def row(name: str, v: dict[str, Any] | None) -> dict[str, str]:
        return {"vs baseline": name, **{s: shown(v, s) for s in SCENARIOS}}

    tables = [f"**{server}**\n\n" + md_table(pd.DataFrame(
                  ([row(AGAIN, again[server])] if server in again else [])
                  + [row(o.differs, found[o].get(server)) for o in measured]))
              for server in servers]
    shown_md = "\n\n".join(tables) if measured else "*No option besides the baseline is measured yet.*"
    return f"{md_table(listed)}\n\n{shown_md}\n"


def runtimes_chart(ds: Dataset, prefix: str = "") -> str:
    """Grouped bars per server: each measured option's ratio per scenario (the baseline is the line at
    1), whiskered from the worst to the best pairing of repetitions, beside the baseline measured
    again (its bars are the run-to-run drift an option must exceed)."""
    found: dict[str, dict[str, Any]] = {o.label: v for o, v in ratios(ds).items() if o != BASELINE}
    if not found:
        return "*No chart yet: no option other than the baseline is measured.*\n"
    again = drift(ds)  # the baseline measured twice: the noise floor
    charts = []
    for server in sorted({s for v in found.values() for s in v}, key=server_rank):
        shown = ({AGAIN: {server: again[server]}} if server in again else {}) | found
        bars = pd.DataFrame([{"option": label, "scenario": s, "median": v[server]["ratios"][s],
                              "min": v[server]["spread"][s][0], "max": v[server]["spread"][s][1],
                              "n": 2, "mad": 0.0}  # whiskers from the worst to the best pairing
                             for label, v in shown.items() if server in v
                             for s in SCENARIOS if s in v[server]["ratios"]])
        fig = plot(bars, "scenario", "option", str, x_title="scenario", sort=False, category_x=True,
                   title=f"Speed relative to redis-py on CPython 3.11 (asyncio loop), {server}",
                   y_title="ratio to baseline (above 1: faster)")
        fig.add_hline(y=1.0, line_dash="dot")
        charts.append(chart(fig, f"runtimes-ratios-{server}"))
    return "\n\n".join(charts) + "\n"


def drifting(ds: Dataset) -> dict[tuple[str, str], float]:
    """(server, scenario) cells where the baseline measured twice differs beyond noise: a ratio of
    another run there says nothing about the option, so no recommendation leans on it."""
    return {(server, s): r for server, v in drift(ds).items() for s, r in v["ratios"].items()
            if not v["noise"][s] and s != "reference"}


def recommendation(ds: Dataset, prefix: str = "") -> str:
    """The option with the best geometric-mean ratio over its servers and scenarios, if it beats
    the baseline beyond noise. A ratio that is noise counts as 1 (no measured difference), and a
    scenario the baseline itself drifts in on a server is left out (named in the text).

    ``reference`` is left out: it times the raw client (PING, EVALSHA), not Conveyor, so a driver
    with a faster raw client but a slower queue must not be recommended on its strength.
    """
    moved = drifting(ds)
    measured = {o: by for o, by in ratios(ds).items() if o != BASELINE}
    found = {o: {(v, s): 1.0 if got["noise"][s] else r for v, got in by.items()
                 for s, r in got["ratios"].items()
                 if s != "reference" and (got["same_run"] or (v, s) not in moved)}
             for o, by in measured.items()}
    # an option judged on fewer than half the cells it was measured in (the rest drift) is not judged
    cells = {o: sum(s != "reference" for got in by.values() for s in got["ratios"])
             for o, by in measured.items()}
    overall = {o: float(np.exp(np.log(list(r.values())).mean())) for o, r in found.items()
               if r and 2 * len(r) >= cells[o]}
    if not overall and measured:
        return ("**No recommendation from these runs:** the baseline measured twice differs beyond noise "
                "in more than half of the scenarios and servers each option was measured in, so no "
                f"option's ratios can be told from this machine's run-to-run drift: {drift_cells(moved)}. "
                "Measure again on a quieter machine; until then the default (redis-py with hiredis) is "
                "the one Conveyor is tested and measured with.\n")
    if not overall:
        return ("**No recommendation yet:** no runtime, loop or driver other than the baseline has been "
                "measured. Until then the default (redis-py with hiredis) is the one Conveyor is tested and "
                "measured with.\n")
    best = max(overall, key=overall.__getitem__)
    # a scenario measured beside the baseline in one run is kept even where separate runs drift
    skipped = {(v, s): moved[v, s] for v, got in measured[best].items() for s in got["ratios"]
               if (v, s) in moved and not got["same_run"]}
    scope = (f"{', '.join(sorted({s for _, s in found[best]}))} "
             f"on {', '.join(sorted({v for v, _ in found[best]}, key=server_rank))}, noise counted as 1.00x"
             f"{left_out(skipped)}")
    unjudged = [o.label for o in measured if o not in overall]
    judged = (f" Not judged: {', '.join(unjudged)}, measured in runs of their own and, in more than half "
              f"of their scenarios and servers, where the baseline's runs differ beyond noise "
              f"({drift_cells(moved)})." if unjudged else "")
    # with options left unjudged, "no measured option" would include them: say which ones were judged
    kind = "option judged here" if unjudged else "measured option"
    if overall[best] <= 1 + THRESHOLD:
        return (f"**Keep the default.** No {kind} beats the baseline beyond noise "
                f"(±{THRESHOLD:.0%}): the best, {best.label}, reaches {times(overall[best])} of it "
                f"(geometric mean over {scope}).{judged}\n")
    return (f"**{best.label}** is the fastest {kind}: {times(overall[best])} the baseline "
            f"(geometric mean over {scope}). Weigh it against the trade-offs below before "
            f"switching.{judged}\n")


def left_out(moved: dict[tuple[str, str], float]) -> str:
    """``; left out, where the baseline measured twice differs beyond noise: latency on valkey-9.1
    (0.34x), ...`` for the cells the baseline drifts in."""
    if not moved:
        return ""
    return f"; left out, where the baseline measured twice differs beyond noise: {drift_cells(moved)}"


def drift_cells(moved: dict[tuple[str, str], float]) -> str:
    """``latency on valkey-9.1 (0.34x), redis-8.2 (1.20x); process on ...``"""
    by: dict[str, list[str]] = {}
    for server, scenario in sorted(moved, key=lambda k: server_rank(k[0])):
        by.setdefault(scenario, []).append(f"{server} ({times(moved[server, scenario])})")
    return "; ".join(f"{s} on {', '.join(v)}" for s, v in sorted(by.items()))


def install_sizes(ds: Dataset) -> dict[str, tuple[int, str]]:
    """Each client package's install size in bytes, from the newest run that recorded it, with
    that run's id (the runs table says which runs the page reads them from)."""
    sizes: dict[str, tuple[int, str]] = {}
    for run_id, doc in ds.runs.doc.items():  # oldest first: a newer run's figure replaces it
        for package, size in (doc["method"].get("client_install_bytes") or {}).items():
            sizes[package] = (int(size), str(run_id))
    return sizes


def trade_offs(ds: Dataset, prefix: str = "") -> str:
    """Topologies through Conveyor and install size (recorded by a bench run) of each driver."""
    sizes = {package: size for package, (size, _) in install_sizes(ds).items()}
    return md_table(pd.DataFrame([{"driver": d, "Cluster": c, "Sentinel": s, "TLS": t, "install size":
                                   f"{sum(sizes[p] for p in pk) / 1e6:.1f} MB" if set(pk) <= set(sizes)
                                   else "not measured yet"}
                                  for d, (c, s, t, pk) in TRADE_OFFS.items()])) + "\n"


def runtimes_commands(ds: Dataset, prefix: str = "") -> str:
    """The commands that produce this page's data."""
    lines = "\n".join(f"# {n}. {'; '.join(o.label for o in OPTIONS if command_number(o) == n)}\n"
                      f"{cell(command)}" for n, command in enumerate(COMMANDS, 1))
    again = (f"# {len(COMMANDS) + 1}. the baseline again, so each option of a run of its own has a "
             "baseline run near it\n"
             + cell(Option(BASELINE_PYTHON).command))
    return f"```sh\n{lines}\n{again}\n```\n"


SECTIONS = {"runtimes_table": runtimes_table, "runtimes_chart": runtimes_chart,
            "runtimes_recommendation": recommendation, "runtimes_trade_offs": trade_offs,
            "runtimes_commands": runtimes_commands}
