"""Peers page, goals: each performance goal of the comparison, met or not, and where not,
why, from what a job cost each library in the same run (server commands and reads, server
and client CPU per job; ``bench/peers/costs.py``). Nothing here is typed in: every figure is
read from the newest file with a ``peers`` section."""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd

from bench.report.load import Dataset
from bench.report.peers import NO_PEERS, REF, peers_run, peers_section
from bench.report.text import MISSING, fmt, md_table, no_data, source_line, span, times, times_beside

# goal, scenario, params to match, metric, higher is better, required ratio (Conveyor vs best peer)
GOALS: list[tuple[str, str, dict[str, Any], str, bool, float]] = [
    ("process at concurrency 32", "process", {"concurrency": 32}, "jobs_per_s", True, 15.0),
    ("bulk enqueue (batch 50)", "enqueue-bulk", {}, "jobs_per_s", True, 3.0),
    ("memory per waiting job", "memory", {}, "bytes_per_job", False, 1.0),
    ("enqueue, one call per job", "enqueue-single", {}, "jobs_per_s", True, 1.0),
]
COSTS = {"per_job_commands": "server commands", "per_job_reads": "server reads (round trips)",
         "per_job_server_cpu_us": "server CPU (µs)", "per_job_client_cpu_us": "client CPU (µs)"}


def best_row(peers: dict[str, Any], server: str, library: str,
             goal: tuple[Any, ...]) -> dict[str, Any] | None:
    """The library's measured row with the best figure for ``goal`` (any flavour or API)."""
    _, scenario, match, metric, higher, _ = goal
    found = [r for r in peers["rows"]
             if (r["server"], r["library"], r["scenario"], r["status"]) == (server, library, scenario, "ok")
             and metric in r.get("metrics", {}) and all(r["params"].get(k) == v for k, v in match.items())]
    pick = max if higher else min
    return pick(found, key=lambda r: r["metrics"][metric]["median"]) if found else None


def _figure(row: dict[str, Any], metric: str) -> float:
    return float(row["metrics"][metric]["median"])


def _label(row: dict[str, Any]) -> str:
    api = row["params"].get("api")
    note = row.get("_note")  # a tuned row names its settings: the figure is that tuning's
    return (f"{row['library']} ({row['flavor']}{', ' + api if api and api != 'bulk' else ''}"
            f"{': ' + note if note else ''})")


def _noted(peers: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its flavour's note when it is a tuned row: a peer's row other than its first
    (default), or a row split over several worker processes (Conveyor's two workers are defaults)."""
    flavors = peers.get("libraries", {}).get(row["library"], {}).get("flavors", {})
    first = next(iter(flavors), row["flavor"])
    flavor = flavors.get(row["flavor"], {})
    tuned = ((row["library"] != REF and row["flavor"] != first)
             or (flavor.get("settings") or {}).get("processes", 1) > 1)
    note = flavor.get("note") if tuned else None
    return {**row, "_note": note} if note else row


def ratio_range(ref: dict[str, Any], peer: dict[str, Any], metric: str, higher: bool
                ) -> tuple[float, float] | None:
    """Conveyor's ratio to the peer from the worst to the best pairing of their repetitions, or
    None when either has a single repetition (no spread to judge by)."""
    a, b = ref["metrics"][metric], peer["metrics"][metric]
    if min(int(a.get("count", 1)), int(b.get("count", 1))) < 2:
        return None
    if not higher:
        a, b = b, a
    return float(a["min"]) / float(b["max"]), float(a["max"]) / float(b["min"])


def verdict(ratio: float, need: float, spread: tuple[float, float] | None) -> str:
    """``met`` or ``**not met**``, qualified where the repetitions do not settle it."""
    said = "met" if ratio >= need else "**not met**"
    if spread is None:
        return f"{said}, one repetition: no spread to judge by"
    lo, hi = spread
    if ratio >= need > lo:
        return f"{said} at the medians, not at the worst pairing ({times(lo)})"
    if hi >= need > ratio:
        return f"{said} at the medians; the best pairing reaches {times(hi)}"
    return said


def _costs(rows: list[dict[str, Any]]) -> str:
    table = [{"row": _label(r), **{h: fmt(r["metrics"][m]["median"]) if m in r["metrics"] else "not recorded"
                                   for m, h in COSTS.items()}} for r in rows]
    return md_table(pd.DataFrame(table))


def _why(goal: tuple[Any, ...], ref: dict[str, Any], peer: dict[str, Any], cores: int) -> str:
    """Where the gap comes from, computed from the per-job costs of both rows."""
    if not all(m in r["metrics"] for r in (ref, peer) for m in COSTS):
        return ("Per-job costs (commands, reads, CPU) were not recorded in this run: a run with the "
                "current suite records them.")
    _, scenario, _, metric, _, need = goal
    cpu = {k: sum(r["metrics"][f"per_job_{m}_cpu_us"]["median"] for m in ("server", "client"))
           for k, r in (("ref", ref), ("peer", peer))}
    if scenario == "process":
        wanted = need * _figure(peer, metric)
        return (f"Reaching {times(need)} would take {fmt(wanted)} jobs/s, that is at most "
                f"{fmt(cores * 1e6 / wanted)} µs of CPU per job (worker and server together) on this "
                f"{cores}-core machine. Conveyor spends {fmt(cpu['ref'])} µs per job "
                f"({fmt(ref['metrics']['per_job_client_cpu_us']['median'])} in the worker process, "
                f"{fmt(ref['metrics']['per_job_server_cpu_us']['median'])} in the server), which "
                f"bounds it near {fmt(cores * 1e6 / cpu['ref'])} jobs/s; it measured "
                f"{fmt(_figure(ref, metric))}, {_figure(ref, metric) * cpu['ref'] / (cores * 1e4):.0f}% "
                f"of that bound. {peer['library']} spends "
                f"{fmt(cpu['peer'])} µs. The worker's share includes the handler's log write, the "
                "same for every library.")
    return (f"Per job, {peer['library']} makes {fmt(peer['metrics']['per_job_reads']['median'])} round "
            f"trips running {fmt(peer['metrics']['per_job_commands']['median'])} server commands; Conveyor "
            f"makes {fmt(ref['metrics']['per_job_reads']['median'])} running "
            f"{fmt(ref['metrics']['per_job_commands']['median'])} (a script call counts with the commands it "
            f"runs). CPU per job, client and server together: {peer['library']} {fmt(cpu['peer'])} µs, "
            f"Conveyor {fmt(cpu['ref'])} µs.")


class Compared(NamedTuple):
    """Conveyor's best row against the best peer's for one goal on one server."""

    ref: dict[str, Any]
    peer: dict[str, Any]
    ratio: float  # above 1: Conveyor is ahead
    spread: tuple[float, float] | None  # worst to best pairing of repetitions


def compared(peers: dict[str, Any], server: str, goal: tuple[Any, ...]) -> Compared | str:
    """The goal's comparison on ``server``, or why there is none."""
    ref = best_row(peers, server, REF, goal)
    ref = ref and _noted(peers, ref)
    others = [_noted(peers, r) for lib in dict.fromkeys(r["library"] for r in peers["rows"])
              if lib != REF if (r := best_row(peers, server, lib, goal))]
    if ref is None or not others:
        return "Conveyor not measured" if ref is None else "no peer measured (or none has the API)"
    metric, higher = goal[3], goal[4]
    peer = (max if higher else min)(others, key=lambda r: _figure(r, metric))
    ratio = (_figure(ref, metric) / _figure(peer, metric) if higher
             else _figure(peer, metric) / _figure(ref, metric))
    return Compared(ref, peer, ratio, ratio_range(ref, peer, metric, higher))


@peers_section
def peers_home(peers: dict[str, Any], frame: pd.DataFrame, prefix: str) -> str:
    """Home: Conveyor against the best peer in three goals, each with its range and verdict."""
    server = frame.server.iloc[0]
    others = [name for name in peers["libraries"] if name != REF]
    measured = sum(bool(peers["libraries"][name]["measured"]) for name in others)
    lines = [f"Against the best of {len(others)} other Python queue{'s' * (len(others) != 1)} ({measured} "
             f"measured) on {server} "
             f"([Peers]({prefix}peers.md)); above 1x means Conveyor is ahead, the range runs from the "
             "worst to the best pairing of the two libraries' repetitions:\n"]
    for goal in GOALS[:3]:
        found = compared(peers, server, goal)
        if isinstance(found, str):
            lines.append(f"- {goal[0]}: not measured ({found})")
            continue
        shown = (f"**{times_beside(found.ratio, goal[5])}**"
                 + (f" ({span(*found.spread)})" if found.spread else ""))
        lines.append(f"- {goal[0]}: {shown} against {_label(found.peer)}; goal {times(goal[5])}: "
                     f"{verdict(found.ratio, goal[5], found.spread)}")
    return "\n".join(lines)


def peers_goals(ds: Dataset, prefix: str = "") -> str:
    """Per server, each goal: Conveyor, the best peer, the ratio, met or not, and why not."""
    run = peers_run(ds)
    if run is None:
        return no_data(NO_PEERS)
    peers, cores = run.doc["peers"], int(run.doc["environment"].get("cores") or 1)
    parts = []
    for server in dict.fromkeys(r["server"] for r in peers["rows"]):
        table, notes = [], []
        for goal in GOALS:
            found = compared(peers, server, goal)
            if isinstance(found, str):
                table.append({"goal": f"{goal[0]}: {times(goal[5])}", "Conveyor": MISSING,
                              "best peer": MISSING, "ratio": MISSING, "verdict": found})
                continue
            ref, peer, ratio, spread = found
            metric, need = goal[3], goal[5]
            met = ratio >= need
            table.append({"goal": f"{goal[0]}: {times(need)}",
                          "Conveyor": f"{fmt(_figure(ref, metric))} ({_label(ref)})",
                          "best peer": f"{fmt(_figure(peer, metric))} ({_label(peer)})",
                          "ratio": times_beside(ratio, need) + (f" ({span(*spread)})" if spread else ""),
                          "verdict": verdict(ratio, need, spread)})
            if not met:
                recorded = any(m in r["metrics"] for r in (ref, peer) for m in COSTS)
                notes += [f"**{goal[0]}: not met** ({times_beside(ratio, need)} of {times(need)}). "
                          + _why(goal, ref, peer, cores), *([_costs([ref, peer])] if recorded else [])]
        parts += [f"### {server}", md_table(pd.DataFrame(table)), *notes]
    return "\n\n".join([*parts, source_line(run, prefix)])


SECTIONS = {"peers_goals": peers_goals, "peers_home": peers_home}
