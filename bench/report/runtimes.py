"""Runtimes and drivers page: each interpreter, event loop and client driver as a ratio to the baseline.

The baseline is redis-py (with hiredis) on CPython 3.11 with the standard asyncio loop. An option differs
from it in one dimension; its cells are like-for-like ratios on the same server (configuration
``default``, RESP3, the same case parameters), from the same run when it holds both (the pure-Python
parser variant), else from the newest baseline run on the same machine. Options without data name the
command that measures them; the recommendation is computed from the ratios, never typed.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bench.report.common import server_rank
from bench.report.compare import THRESHOLD, versus
from bench.report.figures import chart, plot
from bench.report.load import Dataset
from bench.report.text import cell, md_table, times

# The scenarios compared and the metric each is judged by (True: lower is better).
SCENARIOS = {"reference": ("evalsha_cN_ops_per_s", False), "enqueue-single": ("jobs_per_s", False),
             "enqueue-bulk": ("jobs_per_s", False), "process": ("jobs_per_s", False),
             "latency": ("p99_ms", True)}
BENCH = f"--scenarios {','.join(SCENARIOS)} --servers valkey-9.1,redis-8.2 --configs default"
DRIVERS = {"redis-py": "redis-py + hiredis", "redis-py-pure": "redis-py, pure-Python parser",
           "glide": "valkey-glide"}


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
    def label(self) -> str:
        return f"CPython {self.short}"


BASELINE = Option("3.11")
OPTIONS = (BASELINE, Option("3.12"), Option("3.13"), Option("3.11", "uvloop", args=" --loop uvloop"),
           Option("3.11", driver="redis-py-pure", args=" --driver redis-py-pure"),
           Option("3.11", driver="glide", args=" --driver glide"))
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
        machine=runs.machine.tolist(), created=runs.created.tolist())


def ratios(ds: Dataset) -> dict[Option, dict[str, Any]]:
    """Per option: its server, the geometric-mean ratio per scenario (above 1: better), noise, runs."""
    rows = tagged(ds)
    base = rows[rows.option == BASELINE.short]
    out: dict[Option, dict[str, Any]] = {}
    for option in OPTIONS:
        pairs = versus(rows[rows.option == option.short], base, ["server", "scenario", "key", "machine"])
        if pairs.empty:  # prefer the same run, else the newest baseline run on the machine
            continue
        pairs = pairs.assign(same=pairs.run_id == pairs.run_id_base).sort_values(["same", "created_base"])
        pairs = pairs.groupby(["server", "scenario", "key"], sort=False).tail(1)
        server = min(pairs.server.unique(), key=server_rank)
        pairs = pairs[(pairs.server == server) & (pairs["median"] > 0) & (pairs.median_base > 0)]
        lower = pairs.scenario.map(lambda s: SCENARIOS[s][1]).astype(bool)
        per = pairs.assign(log=np.log(pairs.ratio).where(~lower, -np.log(pairs.ratio))).groupby("scenario")
        if not pairs.empty:
            out[option] = {"server": server, "ratios": np.exp(per.log.mean()).to_dict(),
                           "noise": per.noise.all().to_dict()}
    return out


def runtimes_table(ds: Dataset, prefix: str = "") -> str:
    """Which options are measured, then one row per scenario and one column per measured option."""
    found = ratios(ds)
    def missing(option: Option) -> str:
        absent = [s for s in SCENARIOS if s not in found[option]["ratios"]]
        return f"; not measured yet: {', '.join(absent)} (— below)" if absent else ""

    status = [{"CPython · loop · driver": o.short + (" (baseline)" if o == BASELINE else ""),
               "status": (f"measured on {found[o]['server']}{missing(o)}"
                          if o in found else f"not measured yet: command {n} below")}
              for n, o in enumerate(OPTIONS, 1)]
    measured = [o for o in OPTIONS if o in found and o != BASELINE]
    table = pd.DataFrame({"scenario": list(SCENARIOS), **{
        o.short: [times(r) + (" (noise)" if found[o]["noise"][s] or abs(r - 1) <= THRESHOLD else "")
                  if (r := found[o]["ratios"].get(s)) is not None else "—" for s in SCENARIOS]
        for o in measured}})
    shown = md_table(table) if measured else "*No option besides the baseline is measured yet.*"
    return f"{md_table(pd.DataFrame(status))}\n\n{shown}\n"


def runtimes_chart(ds: Dataset, prefix: str = "") -> str:
    """Grouped bars: each measured option's ratio per scenario (the baseline is the line at 1)."""
    found = {o: v["ratios"] for o, v in ratios(ds).items() if o != BASELINE}
    if not found:
        return "*No chart yet: no option other than the baseline is measured.*\n"
    bars = pd.DataFrame([{"option": o.label, "scenario": s, "median": r[s]}
                         for o, r in found.items() for s in SCENARIOS if s in r])
    fig = plot(bars, "scenario", "option", str, x_title="scenario", sort=False, category_x=True,
               title="Speed relative to redis-py on CPython 3.11 (asyncio loop)",
               y_title="ratio to baseline (above 1: faster)")
    fig.add_hline(y=1.0, line_dash="dot")
    return chart(fig, "runtimes-ratios") + "\n"


def recommendation(ds: Dataset, prefix: str = "") -> str:
    """The option with the best geometric-mean ratio, if it beats the baseline beyond noise.

    ``reference`` is left out: it times the raw client (PING, EVALSHA), not Conveyor, so a driver
    with a faster raw client but a slower queue must not be recommended on its strength.
    """
    found = {o: (v["server"], {s: r for s, r in v["ratios"].items() if s != "reference"})
             for o, v in ratios(ds).items() if o != BASELINE}
    overall = {o: float(np.exp(np.log(list(r.values())).mean())) for o, (_, r) in found.items() if r}
    if not overall:
        return ("**No recommendation yet:** no runtime, loop or driver other than the baseline has been "
                "measured. Until then the default (redis-py with hiredis) is the one Conveyor is tested and "
                "measured with.\n")
    best = max(overall, key=overall.__getitem__)
    scope = ", ".join(sorted(found[best][1]))
    if overall[best] <= 1 + THRESHOLD:
        return (f"**Keep the default.** No measured option beats the baseline beyond noise "
                f"(±{THRESHOLD:.0%}): the best, {best.label}, reaches {times(overall[best])} of it "
                f"(geometric mean over {scope}).\n")
    return (f"**{best.label}** is the fastest measured option: {times(overall[best])} the baseline "
            f"(geometric mean over {scope}, on {found[best][0]}). Weigh it against the trade-offs below "
            "before switching.\n")


def trade_offs(ds: Dataset, prefix: str = "") -> str:
    """Topologies through Conveyor and install size (recorded by a bench run) of each driver."""
    sizes: dict[str, int] = {}
    for doc in ds.runs.doc:
        sizes.update(doc["method"].get("client_install_bytes") or {})
    return md_table(pd.DataFrame([{"driver": d, "Cluster": c, "Sentinel": s, "TLS": t, "install size":
                                   f"{sum(sizes[p] for p in pk) / 1e6:.1f} MB" if set(pk) <= set(sizes)
                                   else "not measured yet"}
                                  for d, (c, s, t, pk) in TRADE_OFFS.items()])) + "\n"


def runtimes_commands(ds: Dataset, prefix: str = "") -> str:
    """The commands that produce this page's data."""
    lines = "\n".join(f"# {n}. {o.label}\n{cell(f'nox -s bench_python-{o.python} -- {BENCH}{o.args}')}"
                      for n, o in enumerate(OPTIONS, 1))
    return f"```sh\n{lines}\n```\n"


SECTIONS = {"runtimes_table": runtimes_table, "runtimes_chart": runtimes_chart,
            "runtimes_recommendation": recommendation, "runtimes_trade_offs": trade_offs,
            "runtimes_commands": runtimes_commands}
