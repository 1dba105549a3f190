"""The Peers page: Conveyor against other Python queues, from the newest file with ``peers``.

Sections: ``peers_home`` (three ratios for Home), ``peers_libraries`` (versions, settings),
``peers_speed`` (tables, ratios to Conveyor, charts), ``peers_crash`` (the crash table) and
``peers_caveats``. Ratios compare figures of one run on one server; for Conveyor the better
of its two workers (sync ``Worker``, asyncio ``AsyncWorker``) is the reference.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.figures import chart, figure
from bench.report.load import Dataset
from bench.report.text import admonition, fmt, md_table, no_data, source_line, times

REF = "conveyor"
ENQUEUE = [  # (column header, scenario, params match, metric, higher is better)
    ("enqueue sync", "enqueue-single", {"api": "sync"}, "jobs_per_s", True),
    ("enqueue asyncio", "enqueue-single", {"api": "async"}, "jobs_per_s", True),
    ("bulk (50)", "enqueue-bulk", {}, "jobs_per_s", True),
]
PROCESS = [
    ("process c=1", "process", {"concurrency": 1}, "jobs_per_s", True),
    ("process c=32", "process", {"concurrency": 32}, "jobs_per_s", True),
    ("process c=100", "process", {"concurrency": 100}, "jobs_per_s", True),
]
COSTS = [
    ("latency p50 (ms)", "latency", {}, "p50_ms", False),
    ("p95 (ms)", "latency", {}, "p95_ms", False),
    ("p99 (ms)", "latency", {}, "p99_ms", False),
    ("memory (B/job)", "memory", {}, "bytes_per_job", False),
]
FAULT_NAMES = {"sigkill": "worker SIGKILL", "server-restart": "server restart",
               "connection-cut": "connections cut"}
SCENARIO_COLUMNS = ENQUEUE + PROCESS + COSTS


def _latest(ds: Dataset) -> tuple[pd.Series, dict[str, Any]] | None:
    for run_id in reversed(ds.runs.run_id.tolist()):
        run = ds.run(run_id)
        if run.doc.get("peers"):
            return run, run.doc["peers"]
    return None


def _value(peers: dict[str, Any], server: str, library: str, flavor: str | None,  # noqa: PLR0917
           scenario: str, match: dict[str, Any], metric: str) -> tuple[float | None, str]:
    """(median, status) of one cell; flavor None: the best flavour of the library."""
    found: list[float] = []
    status = ""
    for row in peers["rows"]:
        if (row["server"], row["library"], row["scenario"]) != (server, library, scenario):
            continue
        if flavor is not None and row["flavor"] != flavor:
            continue
        if any(row["params"].get(k) != v for k, v in match.items()):
            continue
        if row["status"] == "ok" and metric in row.get("metrics", {}):
            found.append(row["metrics"][metric]["median"])
        elif row["status"] == "timeout" and metric in row.get("metrics", {}):
            status = f"≈{fmt(row['metrics'][metric]['median'])} (timed out)"
        elif row["status"] != "ok":
            status = row["status"]
    if not found:
        return None, status
    higher = next(h for _, s, _, m, h in SCENARIO_COLUMNS if s == scenario and m == metric)
    return (max(found) if higher else min(found)), "ok"


def _servers(peers: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["server"] for r in peers["rows"]))


def _row_keys(peers: dict[str, Any], server: str) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["library"], r["flavor"]) for r in peers["rows"]
                              if r["server"] == server))


def _cell(value: float | None, status: str) -> str:
    if value is not None:
        return fmt(value)
    return {"no bulk API": "no bulk API", "timeout": "timed out", "failed": "failed",
            "": "—"}.get(status, status)


def _ratio(ref: float | None, value: float | None, higher: bool) -> float | None:
    if ref is None or value is None or value <= 0 or ref <= 0:
        return None
    return ref / value if higher else value / ref


def speed_table(peers: dict[str, Any], server: str, columns: list[Any]) -> pd.DataFrame:
    """One row per library and flavour, one column per scenario of ``columns``."""
    out = []
    for library, flavor in _row_keys(peers, server):
        line = {"library (row)": f"{library} ({flavor})"}
        for header, scenario, match, metric, _ in columns:
            line[header] = _cell(*_value(peers, server, library, flavor, scenario, match, metric))
        out.append(line)
    return pd.DataFrame(out)


def ratio_table(peers: dict[str, Any], server: str, columns: list[Any]) -> pd.DataFrame:
    """How many times better Conveyor (best worker) is than each peer (best flavour)."""
    libraries = [lib for lib in dict.fromkeys(k for k, _ in _row_keys(peers, server)) if lib != REF]
    out = []
    for library in libraries:
        line = {"library": library}
        for header, scenario, match, metric, higher in columns:
            ref, _ = _value(peers, server, REF, None, scenario, match, metric)
            value, status = _value(peers, server, library, None, scenario, match, metric)
            r = _ratio(ref, value, higher)
            line[header.replace(" (ms)", "").replace(" (B/job)", "")] = (
                times(r) if r is not None else _cell(None, status))
        out.append(line)
    return pd.DataFrame(out)


def process_chart(peers: dict[str, Any], server: str) -> str:
    """Process throughput by concurrency, one bar group per library row (log axis at >= 10x)."""
    concs = sorted({r["params"]["concurrency"] for r in peers["rows"]
                    if r["scenario"] == "process" and r["server"] == server})
    traces, values = [], []
    for library, flavor in _row_keys(peers, server):
        ys = [_value(peers, server, library, flavor, "process", {"concurrency": c},
                     "jobs_per_s")[0] for c in concs]
        values += [y for y in ys if y]
        traces.append(go.Bar(name=f"{library} ({flavor})", x=[str(c) for c in concs], y=ys))
    log = bool(values) and max(values) / min(values) >= 10
    fig = figure(f"process: jobs/s by concurrency on {server}" + (" (log axis)" if log else ""),
                 "concurrency", "jobs/s", log_y=log, category_x=True)
    for trace in traces:
        fig.add_trace(trace)
    return chart(fig, f"peers-process-{server}")


def headline_ratios(peers: dict[str, Any], server: str) -> list[tuple[str, float | None, str]]:
    """The three ratios that matter most: process c=32, bulk enqueue, memory per job."""
    picks = [("process at concurrency 32", "process", {"concurrency": 32}, "jobs_per_s", True),
             ("bulk enqueue (batch 50)", "enqueue-bulk", {}, "jobs_per_s", True),
             ("memory per waiting job", "memory", {}, "bytes_per_job", False)]
    out = []
    for label, scenario, match, metric, higher in picks:
        ref, _ = _value(peers, server, REF, None, scenario, match, metric)
        best: tuple[float, str] | None = None
        for library in {r["library"] for r in peers["rows"]} - {REF}:
            value, _ = _value(peers, server, library, None, scenario, match, metric)
            if value is not None and (best is None or (value > best[0]) == higher):
                best = (value, library)
        ratio = _ratio(ref, best[0], higher) if best else None
        out.append((label, ratio, best[1] if best else "no peer measured"))
    return out


# --------------------------------------------------------------------------- sections


def peers_home(ds: Dataset, prefix: str = "") -> str:
    """Home: the three ratios, linked to the Peers page."""
    found = _latest(ds)
    if found is None:
        return no_data("a peer comparison (`nox -s bench -- --libraries all`)")
    run, peers = found
    server = _servers(peers)[0]
    lines = [f"Against the best of nine other Python queues on {server} "
             f"([Peers]({prefix}peers.md)); above 1x means Conveyor is ahead:", ""]
    for label, ratio, peer in headline_ratios(peers, server):
        shown = f"**{times(ratio)}**" if ratio is not None else "not measured"
        lines.append(f"- {label}: {shown} (best peer: {peer})")
    return "\n".join(lines) + "\n\n" + source_line(run, prefix)


def peers_libraries(ds: Dataset, prefix: str = "") -> str:
    """Versions, client versions, settings per row, result retention, install status."""
    found = _latest(ds)
    if found is None:
        return no_data("a peer comparison")
    run, peers = found
    rows = []
    for name, lib in peers["libraries"].items():
        versions = lib.get("versions", {})
        client = ", ".join(f"{k} {v}" for k, v in versions.items() if k != "library")
        flavors = "; ".join(f"**{f}**: {v['note'] or v['settings']}"
                            for f, v in lib["flavors"].items())
        rows.append({"library": f"{name} {versions.get('library', '')}".strip(),
                     "client": client or "—", "rows measured": flavors,
                     "stored per finished job": lib["retention"],
                     "status": "measured" if lib["measured"] else f"not measured: {lib['reason']}"})
    return md_table(pd.DataFrame(rows)) + "\n\n" + source_line(run, prefix)


def peers_speed(ds: Dataset, prefix: str = "") -> str:
    """Per server: the figures, the ratios to Conveyor and the process chart."""
    found = _latest(ds)
    if found is None:
        return no_data("a peer comparison")
    run, peers = found
    parts = []
    for server in _servers(peers):
        parts += [f"### {server}", ""]
        for title, columns in (("Enqueue (jobs/s)", ENQUEUE), ("Process (jobs/s)", PROCESS),
                               ("Unloaded latency and memory per waiting job", COSTS)):
            parts += [f"{title}:", "", md_table(speed_table(peers, server, columns)), ""]
        parts += ["How many times Conveyor's better worker beats each library's better row "
                  "(throughput: Conveyor / peer; latency and memory: peer / Conveyor):", ""]
        for columns in (ENQUEUE, PROCESS, COSTS):
            parts += [md_table(ratio_table(peers, server, columns)), ""]
        parts += [process_chart(peers, server), ""]
    return "\n".join(parts) + "\n" + source_line(run, prefix)


def crash_table(peers: dict[str, Any], server: str) -> pd.DataFrame:
    """One row per library and fault on ``server``."""
    out = []
    for rec in peers["crash"]:
        if rec["server"] != server:
            continue
        ok = rec["status"] == "ok"
        done = rec.get("seconds_to_done")
        out.append({
            "library": rec["library"], "fault": FAULT_NAMES.get(rec["fault"], rec["fault"]),
            "lost / twice / stuck": (f"{rec['lost']} / {rec['run_twice']} / {rec['stuck']}"
                                     if ok else "—"),
            "all done after (s)": (fmt(done) if done is not None else
                                   f"never (limit {fmt(rec['limit_s'])} s)") if ok
            else f"failed: {rec.get('error', '')[:80]}",
            "worker alive": {True: "yes", False: "no (exited)"}.get(
                rec.get("worker_alive"), "—"),
        })
    return pd.DataFrame(out)


def peers_crash(ds: Dataset, prefix: str = "") -> str:
    """The crash table and each library's recovery settings."""
    found = _latest(ds)
    if found is None:
        return no_data("a crash table")
    run, peers = found
    m = peers["method"]["crash"]
    intro = (f"{m['jobs']} jobs, each sleeping {m['sleep_s']} s, a worker at concurrency "
             f"{m['concurrency']}, the fault strikes once a quarter are done; server with AOF "
             f"({m['server_config']}); connections cut for {m['cut_s']} s.")
    settings = pd.DataFrame([{"library": n, "recovery settings used": str(lib["recovery_settings"])}
                             for n, lib in peers["libraries"].items()])
    servers = list(dict.fromkeys(rec["server"] for rec in peers["crash"]))
    tables = [f"**{s}**\n\n{md_table(crash_table(peers, s))}" for s in servers]
    return "\n\n".join([intro, *tables, md_table(settings), source_line(run, prefix)])


def peers_caveats(ds: Dataset, prefix: str = "") -> str:
    """What each library does per job that Conveyor does not, and what could not be measured."""
    found = _latest(ds)
    if found is None:
        return no_data("a peer comparison")
    _, peers = found
    lines = [f"- **{n}**: {lib['caveats']}"
             + (f" Concurrency: {lib['concurrency_note']}." if lib.get("concurrency_note") else "")
             for n, lib in peers["libraries"].items()]
    failed = [r for r in peers["rows"] if r["status"] in ("failed", "timeout")]
    if failed:
        body = "\n".join(f"- {r['server']} {r['library']} ({r['flavor']}) {r['scenario']} "
                         f"{r['params']}: {r['status']}: {r.get('error', '')[:160]}" for r in failed)
        lines.append("\n" + admonition("warning", "Rows without a figure", body))
    return "\n".join(lines)


SECTIONS = {"peers_home": peers_home, "peers_libraries": peers_libraries,
            "peers_speed": peers_speed, "peers_crash": peers_crash,
            "peers_caveats": peers_caveats}
