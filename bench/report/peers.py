"""Peers page: Conveyor against other Python queues, from the newest file with a ``peers`` section.

Ratios compare figures of one run on one server; a library's figure is its better flavour (for
Conveyor the better of ``Worker`` and ``AsyncWorker``), and Conveyor is the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.figures import chart, figure
from bench.report.load import Dataset
from bench.report.text import admonition, fmt, md_table, no_data, source_line, times

REF = "conveyor"
Column = tuple[str, str, dict[str, Any], str, bool]  # header, scenario, params, metric, higher is better
ENQUEUE: list[Column] = [("enqueue sync", "enqueue-single", {"api": "sync"}, "jobs_per_s", True),
                         ("enqueue asyncio", "enqueue-single", {"api": "async"}, "jobs_per_s", True),
                         ("bulk (50)", "enqueue-bulk", {}, "jobs_per_s", True)]
PROCESS: list[Column] = [(f"process c={c}", "process", {"concurrency": c}, "jobs_per_s", True)
                         for c in (1, 32, 100)]
COSTS: list[Column] = [*((f"{h} (ms)", "latency", {}, f"{p}_ms", False)
                         for h, p in (("latency p50", "p50"), ("p95", "p95"), ("p99", "p99"))),
                       ("memory (B/job)", "memory", {}, "bytes_per_job", False)]
HOME: list[Column] = [("process at concurrency 32", *PROCESS[1][1:]),  # type: ignore[list-item]
                      ("bulk enqueue (batch 50)", *ENQUEUE[2][1:]), ("memory per waiting job", *COSTS[3][1:])]
FAULTS = {"sigkill": "worker SIGKILL", "server-restart": "server restart",
          "connection-cut": "connections cut"}
STATUS = {"timeout": "timed out", "": "\N{EM DASH}"}


def peers_section(body: Callable[[dict[str, Any], str], str]) -> Callable[[Dataset, str], str]:
    """A section over the ``peers`` part of the newest file holding one, with its source line."""
    @wraps(body)
    def section(ds: Dataset, prefix: str = "") -> str:
        run = latest(ds)
        if run is None:
            return no_data("a peer comparison (`nox -s bench -- --libraries all`)")
        return f"{body(run.doc['peers'], prefix)}\n\n{source_line(run, prefix)}"
    return section


def latest(ds: Dataset) -> pd.Series | None:
    """The newest run holding a ``peers`` section."""
    found = [r for r, doc in zip(ds.runs.run_id, ds.runs.doc, strict=True) if doc.get("peers")]
    return ds.runs.loc[found[-1]] if found else None


def value(peers: dict[str, Any], server: str, column: Column, library: str,
          flavor: str | None = None) -> tuple[float | None, str]:
    """(figure, status) of one cell; ``flavor`` None: the library's better flavour."""
    _, scenario, match, metric, higher = column
    found, status = [], ""
    for row in peers["rows"]:
        if ((row["server"], row["library"], row["scenario"]) != (server, library, scenario)
                or flavor not in (None, row["flavor"])
                or any(row["params"].get(k) != v for k, v in match.items())):
            continue
        got = row.get("metrics", {}).get(metric)
        if row["status"] == "ok" and got:
            found.append(got["median"])
        elif row["status"] == "timeout" and got:
            status = f"≈{fmt(got['median'])} (timed out)"
        elif row["status"] != "ok":
            status = row["status"]
    return ((max if higher else min)(found), "ok") if found else (None, status)


def shown(found: tuple[float | None, str]) -> str:
    return fmt(found[0]) if found[0] is not None else STATUS.get(found[1], found[1])


def ratio(peers: dict[str, Any], server: str, column: Column, library: str) -> float | None:
    """How many times Conveyor is better than ``library`` (None: either is missing)."""
    ref, other = value(peers, server, column, REF)[0], value(peers, server, column, library)[0]
    if not ref or not other or ref <= 0 or other <= 0:
        return None
    return ref / other if column[4] else other / ref


def ratio_cell(peers: dict[str, Any], server: str, column: Column, library: str) -> str:
    r = ratio(peers, server, column, library)
    return times(r) if r is not None else shown((None, value(peers, server, column, library)[1]))


def rows(peers: dict[str, Any], server: str) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["library"], r["flavor"]) for r in peers["rows"] if r["server"] == server))


def servers(peers: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["server"] for r in peers["rows"]))


@peers_section
def peers_home(peers: dict[str, Any], prefix: str) -> str:
    """Home: Conveyor against the best peer in three figures, linked to the Peers page."""
    server = servers(peers)[0]
    lines = [f"Against the best of nine other Python queues on {server} ([Peers]({prefix}peers.md)); "
             "above 1x means Conveyor is ahead:\n"]
    for column in HOME:
        found = [(v, lib) for lib in {r["library"] for r in peers["rows"]} - {REF}
                 if (v := value(peers, server, column, lib)[0]) is not None]
        best = (max if column[4] else min)(found, default=(None, "no peer measured"))
        r = ratio(peers, server, column, best[1]) if best[0] is not None else None
        lines.append(f"- {column[0]}: {f'**{times(r)}**' if r is not None else 'not measured'} "
                     f"(best peer: {best[1]})")
    return "\n".join(lines)


@peers_section
def peers_libraries(peers: dict[str, Any], prefix: str) -> str:
    """Versions, client versions, settings per row, result retention, install status."""
    table = [{"library": f"{name} {lib.get('versions', {}).get('library', '')}".strip(),
              "client": ", ".join(f"{k} {v}" for k, v in lib.get("versions", {}).items()
                                  if k != "library") or "—",
              "rows measured": "; ".join(f"**{f}**: {v['note'] or v['settings']}"
                                         for f, v in lib["flavors"].items()),
              "stored per finished job": lib["retention"],
              "status": "measured" if lib["measured"] else f"not measured: {lib['reason']}"}
             for name, lib in peers["libraries"].items()]
    return md_table(pd.DataFrame(table))


def process_chart(peers: dict[str, Any], server: str) -> str:
    """Process throughput by concurrency, a bar per library row (log axis when values span 10x)."""
    bars = [go.Bar(name=f"{lib} ({flavor})", x=[c[0].split("=")[1] for c in PROCESS],
                   y=[value(peers, server, c, lib, flavor)[0] for c in PROCESS])
            for lib, flavor in rows(peers, server)]
    values = [y for b in bars for y in b.y if y]
    log = bool(values) and max(values) / min(values) >= 10
    fig = figure(f"process: jobs/s by concurrency on {server}" + (" (log axis)" if log else ""),
                 "concurrency", "jobs/s", log_y=log, category_x=True)
    fig.add_traces(bars)
    return chart(fig, f"peers-process-{server}")


@peers_section
def peers_speed(peers: dict[str, Any], prefix: str) -> str:
    """Per server: the figures, the ratios to Conveyor and the process chart."""
    sizes = peers["method"].get("sizes")
    parts = [] if sizes is None else [
        f"Sizes in this run: {sizes['enqueue']} jobs per enqueue row, {sizes['bulk']} per bulk row, "
        f"a backlog of {sizes['process']} jobs per process case, {sizes['latency']} latency samples; "
        "small sizes time short drains, so a fast library's rate is the least certain figure."]
    for server in servers(peers):
        parts.append(f"### {server}")
        for title, columns in (("Enqueue (jobs/s)", ENQUEUE), ("Process (jobs/s)", PROCESS),
                               ("Unloaded latency and memory per waiting job", COSTS)):
            table = [{"library (row)": f"{lib} ({fl})",
                      **{c[0]: shown(value(peers, server, c, lib, fl)) for c in columns}}
                     for lib, fl in rows(peers, server)]
            parts += [f"{title}:", md_table(pd.DataFrame(table))]
        parts.append("How many times Conveyor's better worker beats each library's better row "
                     "(throughput: Conveyor / peer; latency and memory: peer / Conveyor):")
        others = [lib for lib in dict.fromkeys(lib for lib, _ in rows(peers, server)) if lib != REF]
        for columns in (ENQUEUE, PROCESS, COSTS):
            table = [{"library": lib, **{c[0].replace(" (ms)", "").replace(" (B/job)", ""):
                                         ratio_cell(peers, server, c, lib) for c in columns}}
                     for lib in others]
            parts.append(md_table(pd.DataFrame(table)))
        parts.append(process_chart(peers, server))
    return "\n\n".join(parts)


def crash_row(rec: dict[str, Any]) -> dict[str, str]:
    ok, done = rec["status"] == "ok", rec.get("seconds_to_done")
    after = fmt(done) if done is not None else f"never (limit {fmt(rec['limit_s'])} s)"
    return {"library": rec["library"], "fault": FAULTS.get(rec["fault"], rec["fault"]),
            "lost / twice / stuck": f"{rec['lost']} / {rec['run_twice']} / {rec['stuck']}" if ok else "—",
            "all done after (s)": after if ok else f"failed: {rec.get('error', '')[:80]}",
            "worker alive": {True: "yes", False: "no (exited)"}.get(rec.get("worker_alive"), "—")}


@peers_section
def peers_crash(peers: dict[str, Any], prefix: str) -> str:
    """The crash table per server and each library's recovery settings."""
    m = peers["method"]["crash"]
    intro = (f"{m['jobs']} jobs, each sleeping {m['sleep_s']} s, a worker at concurrency {m['concurrency']}, "
             f"the fault strikes once a quarter are done; server with AOF ({m['server_config']}); "
             f"connections cut for {m['cut_s']} s.")
    tables = [f"**{s}**\n\n" + md_table(pd.DataFrame([crash_row(r) for r in peers["crash"]
                                                      if r["server"] == s]))
              for s in dict.fromkeys(r["server"] for r in peers["crash"])]
    settings = pd.DataFrame([{"library": n, "recovery settings used": str(lib["recovery_settings"])}
                             for n, lib in peers["libraries"].items()])
    return "\n\n".join([intro, *tables, md_table(settings)])


def peers_caveats(ds: Dataset, prefix: str = "") -> str:
    """What each library does per job that Conveyor does not, and what could not be measured."""
    run = latest(ds)
    if run is None:
        return no_data("a peer comparison (`nox -s bench -- --libraries all`)")
    peers = run.doc["peers"]
    lines = [f"- **{n}**: {lib['caveats']}" + (f" Concurrency: {lib['concurrency_note']}."
                                               if lib.get("concurrency_note") else "")
             for n, lib in peers["libraries"].items()]
    failed = [f"- {r['server']} {r['library']} ({r['flavor']}) {r['scenario']} {r['params']}: {r['status']}: "
              f"{r.get('error', '')[:160]}" for r in peers["rows"] if r["status"] in ("failed", "timeout")]
    return "\n".join(lines + (["\n" + admonition("warning", "Rows without a figure", "\n".join(failed))]
                              if failed else []))


SECTIONS = {"peers_home": peers_home, "peers_libraries": peers_libraries, "peers_speed": peers_speed,
            "peers_crash": peers_crash, "peers_caveats": peers_caveats}
