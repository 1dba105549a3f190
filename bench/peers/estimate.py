"""How long a peer run will take (printed by ``--list``), without installing or running anything.

Every throughput case is sized by time (``measure.SIZES``), so most of a run is fixed costs:
child and worker processes starting, backlogs filled, drains of ``process_s``. Where the
newest committed peer result knows a library's rates, latency and crash recovery times, they
refine the guess (a 2 jobs/s drain is held up by its job floor; a fault never recovered from
costs the whole limit). The per-process costs below come from runs on an idle 2-core machine;
on a loaded one they grow.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.peers import LIBRARIES, crash, measure

CHILD_S = 0.7  # one child process: interpreter, the library's import, connect
WORKER_S = 1.2  # a worker process up to its first claim, and killed afterwards
SERVER_S = 1.5  # a server started (twice per server: default, then AOF for the crash table)
FILL_SHARE = 0.6  # filling a backlog takes about this share of its drain (bulk or single API)
FILL_RATE = 4000.0  # jobs/s of an untimed fill when nothing is known
LATENCY_S = 0.002  # one unloaded round trip when nothing is known
RESIZED = 0.25  # share of non-first process cases whose first drain is too short and rerun
RESULTS = Path(__file__).resolve().parents[2] / "results" / "v1"


def newest_peers(results: Path = RESULTS) -> dict[str, Any]:
    """The ``peers`` section of the newest result file holding one ({} if none)."""
    found = []
    for path in results.glob("*/*.json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("peers"):
            found.append((doc.get("created_utc", ""), doc["peers"]))
    return max(found, key=lambda item: item[0])[1] if found else {}


def _median(prior: dict[str, Any], library: str, flavor: str, scenario: str, metric: str,
            **match: Any) -> float | None:
    got = [r["metrics"][metric]["median"] for r in prior.get("rows", [])
           if (r["library"], r["flavor"], r["scenario"]) == (library, flavor, scenario)
           and r.get("metrics", {}).get(metric)
           and all(r["params"].get(k) == v for k, v in match.items())]
    return statistics.median(got) if got else None


def sized_by(prior: dict[str, Any], library: str, flavor: str) -> str:
    """The row whose earlier figures size ``flavor``'s cases: itself once ``prior`` holds it,
    else the row it splits over processes (same settings but ``processes``), else the library's
    first (default) row: nearer than a probe for a newly added tuned row."""
    seen = any((r["library"], r["flavor"]) == (library, flavor) for r in prior.get("rows", []))
    flavors = LIBRARIES[library].flavors
    if seen or flavor not in flavors:
        return flavor
    single = {k: v for k, v in flavors[flavor].items() if k != "processes"}
    return next((f for f, s in flavors.items() if f != flavor and s == single),
                next(iter(flavors)))


def known_rates(prior: dict[str, Any], library: str, flavor: str) -> dict[int, float]:
    """jobs/s by concurrency of one library row in ``prior`` (to size backlogs by)."""
    flavor = sized_by(prior, library, flavor)
    return {c: rate for c in measure.SIZES["full"]["concurrencies"]
            if (rate := _median(prior, library, flavor, "process", "jobs_per_s", concurrency=c))}


def _apis(adapter: str) -> int:
    """Timed enqueue cases of one producer row: sync, asyncio, bulk (each if the library has it)."""
    import importlib  # noqa: PLC0415 (adapters import only the standard library at module level)

    peer = importlib.import_module(f"bench.peers.adapters.{adapter}").Peer
    return int(peer.sync_enqueue) + int(peer.async_enqueue) + int(bool(peer.bulk))


def row_seconds(name: str, flavor: str, producer: bool, sizes: dict[str, Any], *,
                reps: int, timeout: float, prior: dict[str, Any]) -> float:
    """One library row on one server: enqueue, memory, process cases, latency."""
    lib = LIBRARIES[name]
    concurrencies, latency = lib.cases(flavor, sizes["concurrencies"])
    flavor = sized_by(prior, name, flavor)
    total = 0.0
    if producer:
        total += reps * _apis(lib.adapter) * (CHILD_S + sizes["enqueue_s"])
        total += reps * ((1 + len(sizes["memory"])) * CHILD_S + sizes["memory"][-1] / FILL_RATE)
    for i, c in enumerate(concurrencies):
        rate = _median(prior, name, flavor, "process", "jobs_per_s", concurrency=c)
        drain = sizes["process_s"] * 1.1
        if rate:
            drain = min(timeout, max(drain, sizes["process_floor"] / rate))
        one = 2 * CHILD_S + WORKER_S + drain * (1 + FILL_SHARE) + 0.3
        total += reps * one
        if not rate:  # no earlier rate: a probe (first concurrency) or a likely resize
            total += (CHILD_S + WORKER_S + sizes["probe_s"]) if i == 0 else RESIZED * one
    if latency:
        p50 = (_median(prior, name, flavor, "latency", "p50_ms") or LATENCY_S * 1e3) / 1e3
        sampled = min(sizes["latency_s"], (sizes["latency"] + measure.LATENCY_WARMUP) * p50)
        total += reps * (CHILD_S + WORKER_S + max(sampled, 15 * p50))
    return total


def crash_seconds(name: str, server: str, sizes: dict[str, Any], prior: dict[str, Any],
                  worst: bool) -> float:
    """One library's three faults on one server; ``worst``: every fault waits the full limit."""
    total = 0.0
    for fault in crash.FAULTS:
        # Never recovered: waited until no job had completed for idle_s (stuck jobs stop
        # progress about a second after the fault); worst: progress dribbles on to the limit.
        recovery = sizes["limit_s"] if worst else sizes["idle_s"] + 1.0
        seen = [r.get("seconds_to_done") for r in prior.get("crash", [])
                if (r["library"], r["fault"], r["server"]) == (name, fault, server)]
        if not worst and seen and seen[0] is not None:
            recovery = min(float(seen[0]), sizes["limit_s"])
        total += CHILD_S + WORKER_S * (2 if fault == "sigkill" else 1) + 1.0 + recovery
        total += SERVER_S if fault == "server-restart" else 0.0
    return total


def run_seconds(libraries: list[str], servers: list[str], *, quick: bool, reps: int,
                timeout: float, worst: bool = False, prior: dict[str, Any] | None = None) -> float:
    """The whole peer run: installs checked, then per server its speed rows and crash table."""
    size = "quick" if quick else "full"
    sizes, crash_sizes = measure.SIZES[size], crash.SIZES[size]
    prior = newest_peers() if prior is None else prior
    total = CHILD_S * len(libraries)  # each library's "info" call
    for server in servers:
        total += 2 * SERVER_S
        for name in libraries:
            for position, flavor in enumerate(LIBRARIES[name].flavors):
                total += row_seconds(name, flavor, position == 0, sizes, reps=reps, timeout=timeout,
                                     prior=prior)
            total += crash_seconds(name, server, crash_sizes, prior, worst)
    return total
