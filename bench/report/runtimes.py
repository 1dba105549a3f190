"""Runtimes and drivers page: each interpreter, event loop and client driver as a ratio to the baseline.

The baseline is redis-py (with hiredis) on CPython 3.11 with the standard asyncio loop. A row is an
option that differs from it in one dimension; its cells are like-for-like ratios on the same server
(configuration ``default``, RESP3, the same case parameters), taken from the same run when the run
holds both (the pure-Python parser variant), else from the newest baseline run on the same machine.
Options without data say so and name the command that measures them; the recommendation is computed
from the ratios, never typed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.common import server_rank
from bench.report.compare import THRESHOLD, ratio
from bench.report.figures import chart, figure
from bench.report.load import Dataset
from bench.report.text import cell, md_table, times

# The scenarios compared, with the metric each is judged by (True: lower is better).
SCENARIOS = {
    "reference": ("evalsha_cN_ops_per_s", False),
    "enqueue-single": ("jobs_per_s", False),
    "enqueue-bulk": ("jobs_per_s", False),
    "process": ("jobs_per_s", False),
    "latency": ("p99_ms", True),
}
VARYING = ("loop", "driver")  # case parameters that name the option, not the case
SERVERS = "valkey-9.1,redis-8.2"
BENCH = f"--scenarios {','.join(SCENARIOS)} --servers {SERVERS} --configs default"


@dataclass(frozen=True)
class Option:
    """One runtime/loop/driver combination and the command that measures it."""

    python: str
    loop: str
    driver: str
    command: str

    @property
    def short(self) -> str:
        driver = {"redis-py": "redis-py + hiredis", "redis-py-pure": "redis-py, pure-Python parser",
                  "glide": "valkey-glide"}[self.driver]
        return f"{self.python} · {self.loop} · {driver}"

    @property
    def label(self) -> str:
        return f"CPython {self.short}"


BASELINE = Option("3.11", "asyncio", "redis-py", f"nox -s bench_python-3.11 -- {BENCH}")
OPTIONS = (
    BASELINE,
    Option("3.12", "asyncio", "redis-py", f"nox -s bench_python-3.12 -- {BENCH}"),
    Option("3.13", "asyncio", "redis-py", f"nox -s bench_python-3.13 -- {BENCH}"),
    Option("3.11", "uvloop", "redis-py", f"nox -s bench_python-3.11 -- {BENCH} --loop uvloop"),
    Option("3.11", "asyncio", "redis-py-pure", f"nox -s bench_python-3.11 -- {BENCH} --driver redis-py-pure"),
    Option("3.11", "asyncio", "glide", f"nox -s bench_python-3.11 -- {BENCH} --driver glide"),
)
# What each driver supports through Conveyor, and its packages (install size read at build time).
TRADE_OFFS = {
    "redis-py": ("the reference Python client (Redis Inc.), pure Python; Conveyor's default",
                 "yes", "yes", "yes", ("redis", "hiredis")),
    "redis-py-pure": ("redis-py without its optional C parser (hiredis): nothing to compile",
                      "yes", "yes", "yes", ("redis",)),
    "glide": ("Valkey project client, Rust core behind a Python binding (2.x); one multiplexed "
              "connection per client, no pool", "not yet in Conveyor",
              "no", "yes", ("valkey-glide", "valkey-glide-sync")),
}


def tag_rows(ds: Dataset) -> pd.DataFrame:
    """Summary rows of the compared metrics, tagged with python, loop, driver and a case key."""
    parts = []
    for scenario, (metric, _) in SCENARIOS.items():
        rows = ds.summary[(ds.summary.scenario == scenario) & (ds.summary.metric == metric)]
        parts.append(rows[(rows.config == "default") & (rows.protocol == 3)])
    rows = pd.concat(parts) if parts else ds.summary.iloc[0:0]
    if rows.empty:
        return rows.assign(python=[], loop_=[], driver_=[], key=[], machine=[], created=[])
    envs = {r: ds.run(r).doc["environment"] for r in rows.run_id.unique()}
    params = [json.loads(c) for c in rows.case]
    return rows.assign(
        python=[".".join(envs[r]["python"].split(".")[:2]) for r in rows.run_id],
        loop_=[p.get("loop", "asyncio") for p in params],
        driver_=[p.get("driver") or ("redis-py-pure" if x == "python" else "redis-py")
                 for p, x in zip(params, rows.parser, strict=True)],
        key=[json.dumps({k: v for k, v in p.items() if k not in VARYING}, sort_keys=True) for p in params],
        machine=[ds.run(r).machine for r in rows.run_id],
        created=[ds.run(r).created for r in rows.run_id],
    )


def _of(rows: pd.DataFrame, option: Option) -> pd.DataFrame:
    same = (rows.python == option.python) & (rows.loop_ == option.loop)
    return rows[same & (rows.driver_ == option.driver)]


def _pairs(mine: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """Option rows joined to baseline rows of the same server, scenario and case: the same run when
    it has them, else the newest baseline run on the same machine."""
    if mine.empty or base.empty:
        return mine.iloc[0:0]
    cols = ["server", "scenario", "key", "machine"]
    joined = mine.merge(base, on=cols, suffixes=("", "_base"))
    if joined.empty:
        return joined
    joined = joined.assign(same=joined.run_id == joined.run_id_base)
    joined = joined.sort_values(["same", "created_base"])
    return joined.groupby(["server", "scenario", "key"], sort=False).tail(1)


def ratios(ds: Dataset) -> dict[Option, dict[str, Any]]:
    """Per option: its server, the geometric-mean ratio per scenario (above 1: better) and the runs."""
    rows = tag_rows(ds)
    base = _of(rows, BASELINE)
    out: dict[Option, dict[str, Any]] = {}
    for option in OPTIONS:
        pairs = _pairs(_of(rows, option), base)
        if pairs.empty:
            continue
        server = min(pairs.server.unique(), key=server_rank)
        pairs = pairs[pairs.server == server]
        found, noise = {}, {}
        for scenario, part in pairs.groupby("scenario"):
            lower = SCENARIOS[str(scenario)][1]
            logs = [math.log(b / a if lower else a / b)
                    for a, b in zip(part["median"], part["median_base"], strict=True) if a > 0 and b > 0]
            if logs:
                found[str(scenario)] = math.exp(sum(logs) / len(logs))
                noise[str(scenario)] = all(_noise(row) for _, row in part.iterrows())
        if found:
            out[option] = {"server": server, "ratios": found, "noise": noise,
                           "same_run": bool(pairs.same.all()),
                           "runs": sorted(set(pairs.run_id) | set(pairs.run_id_base))}
    return out


def _noise(pair: pd.Series) -> bool:
    """A case's difference is noise unless beyond THRESHOLD with the repetitions' ranges apart."""
    stats = ("median", "min", "max", "n")
    mine = pd.Series({k: pair[k] for k in stats})
    base = pd.Series({k: pair[f"{k}_base"] for k in stats})
    return bool(ratio(mine, base)["noise"])


def geomean(values: Any) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs))


def _ratio_text(value: float, noise: bool) -> str:
    return times(value) + (" (noise)" if noise or abs(value - 1) <= THRESHOLD else "")


def runtimes_table(ds: Dataset, prefix: str = "") -> str:
    """One row per option: its ratio to the baseline in each scenario, or "not measured yet"."""
    found = ratios(ds)
    status = []
    for number, option in enumerate(OPTIONS, 1):
        got = found.get(option)
        name = option.short + (" (baseline)" if option == BASELINE else "")
        part = got and len(got["ratios"]) < len(SCENARIOS)
        partial = "; — in the ratios: not measured yet" if part else ""
        text = f"measured on {got['server']}{partial}" if got else f"not measured yet: command {number} below"
        status.append({"CPython · loop · driver": name, "status": text})
    # The ratios themselves: one column per measured option, so the table stays narrow.
    measured = [o for o in OPTIONS if o in found and o != BASELINE]
    ratio_rows = []
    for scenario in SCENARIOS:
        row: dict[str, str] = {"scenario": scenario}
        for option in measured:
            values, noise = found[option]["ratios"], found[option]["noise"]
            row[option.short] = _ratio_text(values[scenario], noise[scenario]) if scenario in values else "—"
        ratio_rows.append(row)
    note = (f"Each cell: the option's speed relative to the baseline on the same server, the geometric "
            f"mean over the scenario's cases (above 1: faster; for `latency` the p99 ratio is inverted, "
            f"so above 1 means lower latency). Marked noise: within ±{THRESHOLD:.0%}, or with the "
            f"repetitions' ranges overlapping (one repetition has no range). Each option "
            f"differs from the baseline in one dimension only.")
    none = "*No option besides the baseline is measured yet.*"
    table = md_table(pd.DataFrame(ratio_rows)) if measured else none
    return f"{md_table(pd.DataFrame(status))}\n\n{note}\n\n{table}\n"


def runtimes_chart(ds: Dataset, prefix: str = "") -> str:
    """Grouped bars: each measured option's ratio per scenario (the baseline is the line at 1)."""
    found = {o: v for o, v in ratios(ds).items() if o != BASELINE}
    if not found:
        return "*No chart yet: no option other than the baseline is measured.*\n"
    fig = figure("Speed relative to redis-py on CPython 3.11 (asyncio loop)", "scenario",
                 "ratio to baseline (above 1: faster)", category_x=True)
    for option, got in found.items():
        names = [s for s in SCENARIOS if s in got["ratios"]]
        fig.add_trace(go.Bar(x=names, y=[got["ratios"][s] for s in names], name=option.label))
    fig.add_hline(y=1.0, line_dash="dot")
    return chart(fig, "runtimes-ratios") + "\n"


def recommendation(ds: Dataset, prefix: str = "") -> str:
    """The option with the best geometric-mean ratio over the scenarios it was measured on, if it
    beats the baseline beyond noise; else the default stays.

    ``reference`` is left out: it times the raw client (PING, EVALSHA), not Conveyor, so a driver
    with a faster raw client but a slower queue must not be recommended on its strength.
    """
    found = {o: {**v, "ratios": {s: r for s, r in v["ratios"].items() if s != "reference"}}
             for o, v in ratios(ds).items() if o != BASELINE}
    found = {o: v for o, v in found.items() if v["ratios"]}
    if not found:
        return ("**No recommendation yet:** no runtime, loop or driver other than the baseline has "
                "been measured. Until then the default (redis-py with hiredis) is the one Conveyor is "
                "tested and measured with.\n")
    overall = {o: geomean(v["ratios"].values()) for o, v in found.items()}
    best = max(overall, key=lambda o: overall[o])
    scope = ", ".join(sorted(found[best]["ratios"]))
    if overall[best] <= 1 + THRESHOLD:
        return (f"**Keep the default.** No measured option beats the baseline beyond noise "
                f"(±{THRESHOLD:.0%}): the best, {best.label}, reaches {times(overall[best])} of "
                f"it (geometric mean over {scope}).\n")
    return (f"**{best.label}** is the fastest measured option: {times(overall[best])} the baseline "
            f"(geometric mean over {scope}, on {found[best]['server']}). Weigh it against the "
            "trade-offs below before switching.\n")


def install_sizes(ds: Dataset) -> dict[str, int]:
    """Installed bytes per client package, as the newest bench run that had it recorded them."""
    sizes: dict[str, int] = {}
    for doc in ds.runs.doc if not ds.empty else []:
        sizes.update(doc["method"].get("client_install_bytes") or {})
    return sizes


def install_size(sizes: dict[str, int], packages: tuple[str, ...]) -> str:
    missing = [p for p in packages if p not in sizes]
    if missing:
        return "not measured yet"
    return f"{sum(sizes[p] for p in packages) / 1e6:.1f} MB"


def trade_offs(ds: Dataset, prefix: str = "") -> str:
    """Maturity, topologies through Conveyor and install size of each driver."""
    records, sizes, notes = [], install_sizes(ds), []
    for driver, (maturity, cluster, sentinel, tls, packages) in TRADE_OFFS.items():
        records.append({"driver": driver, "Cluster": cluster, "Sentinel": sentinel, "TLS": tls,
                        "install size": install_size(sizes, packages)})
        notes.append(f"- **{driver}** ({', '.join(packages)}): {maturity}.")
    size_note = ("Install size: the installed files of the packages, as recorded by a bench run that had "
                 "them installed (`method.client_install_bytes`).")
    runtimes = [{"option": "CPython 3.11 / 3.12 / 3.13", "trade-off": "all supported and tested in CI "
                 "(oldest and newest); newer releases carry interpreter speed-ups and newer bug fixes"},
                {"option": "uvloop", "trade-off": "asyncio only, Linux and macOS (no Windows); one more "
                 "compiled dependency; the `conveyor` CLI runs the standard loop, an `AsyncWorker` "
                 "started with `uvloop.run(worker.run())` runs on uvloop"}]
    return (f"{md_table(pd.DataFrame(records))}\n\n{size_note}\n\n" + "\n".join(notes)
            + f"\n\n{md_table(pd.DataFrame(runtimes))}\n")


def runtimes_commands(ds: Dataset, prefix: str = "") -> str:
    """The commands that produce this page's data."""
    lines = "\n".join(f"# {n}. {o.label}\n{cell(o.command)}" for n, o in enumerate(OPTIONS, 1))
    return f"```sh\n{lines}\n```\n"


SECTIONS = {
    "runtimes_table": runtimes_table,
    "runtimes_chart": runtimes_chart,
    "runtimes_recommendation": recommendation,
    "runtimes_trade_offs": trade_offs,
    "runtimes_commands": runtimes_commands,
}
