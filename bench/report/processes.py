"""Tuning page: what a second worker process did, measured in the newest peers run.

The peers run measures Conveyor's ``AsyncWorker`` at concurrency 32 in one process and split over
several processes sharing that concurrency (its ``processes`` setting), same server and run. The
advice "one worker process per core" holds only where a core is free for the second process; the
suite starts the server on the machine it measures from, so there the processes compete with the
server for the same cores. This section shows the ratio instead of leaving the advice unqualified.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.report.common import SERVER_ORDER, server_rank
from bench.report.compare import ratio, ratio_text
from bench.report.load import Dataset
from bench.report.peers import REF, and_list, peers_run, row_stats
from bench.report.text import fmt, fmt_stat, md_table, no_data, source_line

SINGLE = "AsyncWorker"  # the one-process row the split is compared with (same worker class)
CONCURRENCY = 32
# the two costs the explanation rests on (a wider table overflows the page at 1280 px)
COSTS = {"per_job_reads": "round trips/job", "per_job_server_cpu_us": "server µs/job"}


def _shown(row: dict[str, Any]) -> str:
    got = row_stats(row, "jobs_per_s")
    return fmt_stat(got["median"], 0.0, int(got["n"]), got["min"], got["max"])


def split_flavors(peers: dict[str, Any]) -> dict[str, int]:
    """Conveyor's AsyncWorker rows that split the concurrency over processes: flavour -> processes."""
    flavors = peers.get("libraries", {}).get(REF, {}).get("flavors", {})
    return {name: int(f["settings"]["processes"]) for name, f in flavors.items()
            if (f.get("settings") or {}).get("worker") == "async"
            and int((f.get("settings") or {}).get("processes", 1)) > 1}


def pairs(peers: dict[str, Any]) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    """(server, processes, one-process row, split row) of every server that measured both."""
    split = split_flavors(peers)
    rows = {(r["server"], r["flavor"]): r for r in peers["rows"]
            if r["library"] == REF and r["scenario"] == "process" and r["status"] == "ok"
            and r["params"].get("concurrency") == CONCURRENCY and "jobs_per_s" in (r.get("metrics") or {})}
    found = [(server, split[flavor], rows[server, SINGLE], row) for (server, flavor), row in rows.items()
             if flavor in split and (server, SINGLE) in rows]
    return sorted(found, key=lambda p: server_rank(p[0]))


def costs(one: dict[str, Any], split: dict[str, Any]) -> dict[str, str]:
    """Per-job costs recorded for both rows, as ``one → split``."""
    return {label: f"{fmt(one['metrics'][m]['median'])} → {fmt(split['metrics'][m]['median'])}"
            for m, label in COSTS.items() if m in one["metrics"] and m in split["metrics"]}


def verdict(found: list[tuple[str, dict[str, Any]]]) -> str:
    """Where the split was slower, faster, or no different beyond noise."""
    said: dict[str, list[str]] = {}
    for server, r in found:
        word = "no different beyond noise" if r["noise"] else "faster" if r["ratio"] > 1 else "slower"
        said.setdefault(word, []).append(server)
    return "; ".join(f"{word} on {and_list(servers)}" for word, servers in said.items())


def dearer_calls(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]]) -> bool:
    """Whether, on every server, the split made more round trips per job and cost the server more."""
    return all(all(k in one["metrics"] and k in split["metrics"]
                   and split["metrics"][k]["median"] > one["metrics"][k]["median"] for k in COSTS)
               for _, _, one, split in found)


def worker_processes(ds: Dataset, prefix: str = "") -> str:
    """One AsyncWorker process against the same concurrency split over several, per server."""
    run = peers_run(ds)
    found = pairs(run.doc["peers"]) if run is not None else []
    if run is None or not found:
        return no_data("a peers run with Conveyor's AsyncWorker split over processes "
                       "(`nox -s bench -- --libraries all`)")
    ratios = [(server, ratio(row_stats(split, "jobs_per_s"), row_stats(one, "jobs_per_s")))
              for server, _, one, split in found]
    n = found[0][1]
    rows = [{"server": server, "1 process, jobs/s": _shown(one), f"{n} processes, jobs/s": _shown(split),
             f"{n} processes ÷ 1": ratio_text(r), **costs(one, split)}
            for (server, _, one, split), (_, r) in zip(found, ratios, strict=True)]
    why = (" Each process claims and acknowledges for its own share of the slots, so its calls carry "
           "fewer jobs: the split made more round trips per job and cost the server more CPU per job "
           "on every server (the arrows read one process → the split)." if dearer_calls(found) else "")
    local = all(server in SERVER_ORDER for server, *_ in found)  # servers the suite started itself
    where = "that runs the server too" if local else "(servers as the table names them)"
    return (f"Measured in the peers run on a {run.cores}-core machine {where}: "
            f"{CONCURRENCY} `AsyncWorker` slots in one process against the same {CONCURRENCY} split "
            f"over {n} processes, no-op jobs. The split was {verdict(ratios)}.{why}\n\n"
            f"{md_table(pd.DataFrame(rows))}\n\n{source_line(run, prefix)}")


SECTIONS = {"worker_processes": worker_processes}
