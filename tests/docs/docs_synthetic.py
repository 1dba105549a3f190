"""Synthetic, schema-valid result documents for the docs tests (never written to results/).

Values come from simple formulas, so tests are deterministic; they exercise every section
and chart of the site without a benchmark run.
"""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

from bench import report
from bench.report.load import Dataset
from bench.stats import summarize

BASE = 1000.0


def load_docs(root: Path, *docs: dict[str, Any]) -> Dataset:
    """Write ``docs`` as result files below ``root`` (one per run id) and load them."""
    for doc in docs:
        path = root / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return report.load(root)


def render(ds: Dataset, name: str) -> str:
    """Section ``name`` rendered from ``ds`` with links relative to the site root."""
    return report.SECTIONS[name](ds, "")


def chart_specs(markdown: str) -> list[dict[str, Any]]:
    """The plotly specs of the charts in rendered ``markdown``, in order."""
    return [json.loads(html.unescape(m)) for m in re.findall(r'data-cv-chart="([^"]*)"', markdown)]


def metric(median: float, unit: str, spread: float = 0.02, reps: int = 3) -> dict[str, Any]:
    """A metric record with ``reps`` values spread symmetrically around ``median``."""
    half = reps // 2
    values = [median * (1 + spread * (i - half)) for i in range(reps)]
    return summarize(values, unit)


def row(scenario: str, params: dict[str, Any], metrics: dict[str, dict[str, Any]], *,
        server: str = "valkey-9.1", config: str = "default", protocol: int = 3,
        parser: str = "hiredis", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """One result row."""
    processes = scenario not in ("reference", "memory")
    return {
        "scenario": scenario, "server": server, "config": config, "protocol": protocol,
        "parser": parser, "params": params, "metrics": metrics,
        "exactly_once": ({"enqueued": 10, "acked": 10, "duplicates": 0, "lost": 0, "ok": True}
                         if processes else None),
        "extra": extra or {},
    }


def lifecycle_rows(server: str, scale: float) -> list[dict[str, Any]]:
    """Full grid: concurrency 8 gets 90% of 32's throughput at a lower p99."""
    rows = []
    for payload, pcost in ((64, 1.0), (16384, 0.5)):
        for conc, share, p99 in ((1, 0.3, 1.0), (8, 0.9, 2.0), (32, 1.0, 8.0)):
            rate = BASE * scale * pcost * share
            rows.append(row("lifecycle", {"payload_bytes": payload, "concurrency": conc,
                                          "tasks": 100},
                            {"lifecycles_per_s": metric(rate, "1/s"),
                             "p50_ms": metric(p99 / 4, "ms"), "p95_ms": metric(p99 / 2, "ms"),
                             "p99_ms": metric(p99, "ms"), "max_ms": metric(p99 * 2, "ms")},
                            server=server))
    return rows


def variant_rows() -> list[dict[str, Any]]:
    """Lifecycle and process rows for protocol, parser and persistence variants."""
    out = []
    for config, protocol, parser, factor in (("default", 2, "hiredis", 0.95),
                                             ("default", 3, "python", 0.6),
                                             ("aof-everysec", 3, "hiredis", 0.98),
                                             ("aof-always", 3, "hiredis", 0.2)):
        kw = {"config": config, "protocol": protocol, "parser": parser}
        out.append(row("lifecycle", {"payload_bytes": 64, "concurrency": 8, "tasks": 100},
                       {"lifecycles_per_s": metric(BASE * 0.9 * factor, "1/s"),
                        "p99_ms": metric(2.0 / factor, "ms")}, **kw))
        out.append(row("process", {"jobs": 500, "concurrency": 100, "payload_bytes": 64},
                       {"jobs_per_s": metric(BASE * 2 * factor, "1/s")}, **kw))
    return out


def other_rows() -> list[dict[str, Any]]:
    """One or a few rows of every other scenario on valkey-9.1."""
    ref = {f"{c}_{m}_ops_per_s": metric(BASE * k, "1/s")
           for c, k0 in (("ping", 10), ("evalsha", 8)) for m, k in
           (("c1", k0), ("cN", k0 * 2), ("pipelined", k0 * 20))}
    rows = [row("reference", {"ops": 1000, "concurrency": 32, "pipeline": 100}, ref)]
    rows += [row("enqueue-single", {"jobs": 300, "payload_bytes": 64},
                 {"jobs_per_s": metric(BASE * 3, "1/s"), "p99_ms": metric(0.5, "ms")}),
             *(row("enqueue-bulk", {"jobs": 2000, "batch": 50, "payload_bytes": 64,
                                    "producers": n},
                   {"jobs_per_s": metric(BASE * 30 * k, "1/s"), "p99_ms": metric(3.0 * k, "ms")})
               for n, k in ((1, 1.0), (4, 1.4)))]
    rows += [row("process", {"jobs": 500, "concurrency": c, "payload_bytes": 64},
                 {"jobs_per_s": metric(BASE * k, "1/s"), "elapsed_s": metric(0.5 / k, "s")})
             for c, k in ((1, 0.7), (32, 1.9), (100, 2.0))]
    rows.append(row("process", {"jobs": 500, "concurrency": 32, "payload_bytes": 64,
                                "result_bytes": 100},
                    {"jobs_per_s_storing_results": metric(BASE * 1.9 * 0.8, "1/s", spread=0.01)}))
    rows.append(row("process", {"jobs": 500, "concurrency": 32, "payload_bytes": 64, "prefetch": 32},
                    {"jobs_per_s_prefetch": metric(BASE * 1.9 * 1.3, "1/s")}))
    rows.append(row("process", {"jobs": 500, "concurrency": 32, "payload_bytes": 64,
                                "features": "priorities+limit-key+hooks"},
                    {"jobs_per_s": metric(BASE * 1.5, "1/s"), "elapsed_s": metric(0.5 / 1.5, "s")}))
    rows += [row("latency", {"load": load, "concurrency": 32, **size},
                 {"p50_ms": metric(0.3 * f, "ms"), "p90_ms": metric(0.5 * f, "ms"),
                  "p99_ms": metric(1.0 * f, "ms"), "p99_9_ms": metric(2.0 * f, "ms"),
                  "max_ms": metric(3.0 * f, "ms"), "samples": metric(n, "count", spread=0.0),
                  **({"capacity_jobs_per_s": metric(BASE * 2, "1/s"),
                      "offered_per_s": metric(BASE * 2 * load * 0.98, "1/s"),
                      "offered_load": metric(load * 0.98, "ratio"),
                      "producers": metric(2, "count", spread=0.0)}
                     if isinstance(load, float) else {})})
             for load, f, n, size in (
                 ("unloaded", 1, 50, {"jobs": 50}),
                 ("partly-busy", 3, 50, {"jobs": 50, "busy": 16, "slow_ms": 50}),
                 (0.9, 2, 900, {"duration_s": 0.5, "capacity_jobs": 300}))]
    rows += [row("maintenance", {"backlog": 1000, "batch": b},
                 {"items_per_s": metric(BASE * b ** 0.5, "1/s"),
                  "sweep_p99_ms": metric(0.01 * b, "ms"), "probe_p99_ms": metric(0.2 + b / 500,
                                                                                   "ms")})
             for b in (10, 100, 1000)]
    rows += [row("memory", {"payload_bytes": p, "counts": [100, 1000]},
                 {"bytes_per_job": metric(b, "B", spread=0.0, reps=1)}, config=cfg)
             for p, base_b, tuned_b in ((32, 200, 200), (1024, 1500, 1100))
             for cfg, b in (("default", base_b), ("listpack-1024", tuned_b))]
    rows.append(row("memory", {"id_bytes": 16, "counts": [100, 1000]},
                    {"bytes_per_retained_id": metric(90, "B", spread=0.0, reps=1)}))
    rows += connections_rows() + ha_rows()
    return rows


def ha_rows() -> list[dict[str, Any]]:
    """scale-out (queues over a cluster, wait_replicas on a pair) and tls (redis-7.0 only)."""
    shared = {"min_seconds": 2.0, "batch": 50, "payload_bytes": 64}
    one_caller = {"jobs_per_s", "p50_ms", "p99_ms"}
    rows = [row("scale-out", {"topology": "cluster", "queues": q, **shared},
                {"jobs_per_s": metric(rate, "1/s"), "shards_used": metric(min(q, 3), "count", 0),
                 "shard_balance": metric(balance, "ratio", 0)})
            for q, rate, balance in ((1, 4000.0, 1.0), (3, 9000.0, 0.9))]
    rows += [row("scale-out", {"topology": "replicated", "wait_replicas": w, **shared},
                 {m: metric(v, "ms" if m != "jobs_per_s" else "1/s")
                  for m, v in zip(sorted(one_caller), (rate, 0.3 * (1 + w), 0.9 * (1 + w)), strict=True)})
             for w, rate in ((0, 3000.0), (1, 1500.0))]
    rows += [row("tls", {"tls": flag, "min_seconds": 2.0, "payload_bytes": 64},
                 {"jobs_per_s": metric(rate, "1/s"), "p50_ms": metric(0.3, "ms"),
                  "p99_ms": metric(0.9, "ms")}, server="redis-7.0")
             for flag, rate in ((0, 3000.0), (1, 2400.0))]
    return rows + failover_rows()


def failover_rows() -> list[dict[str, Any]]:
    """failover: three kills per case; cut-then-kill loses 2 jobs per kill without wait_replicas."""
    shared = {"before": 3000, "after": 1000, "pause_ms": 0.0, "cut_ms": 300, "lease": 2.0,
              "detect_ms": 1000}
    rows = []
    for topology, fault, wait in [(t, f, w) for t in ("sentinel", "cluster")
                                  for f in ("kill", "cut-then-kill") for w in (0, 1)]:
        lost = 2.0 if fault == "cut-then-kill" and not wait else 0.0
        counts = {"acknowledged": 4000.0, "lost": lost, "ran_twice": 1.0,
                  "enqueue_errors": 20.0}
        metrics = {k: metric(v, "count", spread=0.0) for k, v in counts.items()}
        metrics["enqueue_recovery_s"] = metric(1.5 + wait, "s", spread=0.1)
        metrics["run_recovery_s"] = metric(2.5, "s", spread=0.1)
        row_ = row("failover", {"topology": topology, "fault": fault, "wait_replicas": wait, **shared},
                   metrics)
        rows.append({**row_, "exactly_once": None})
    return rows


def connections_rows() -> list[dict[str, Any]]:
    """Roles, a pool-size sweep and the too-small pool."""
    roles = {f"connections_{r}": metric(n, "count", spread=0.0, reps=1)
             for r, n in (("pump", 1), ("waiter", 1), ("maint", 1), ("other", 2), ("total", 5))}
    rows = [row("connections", {"kind": "roles", "concurrency": c}, roles) for c in (8, 32)]
    for n in (1, 3):
        served = {f"connections_{r}": metric(count, "count", spread=0.0, reps=1)
                  for r, count in (("pump", n), ("waiter", 1), ("maint", n), ("other", n),
                                   ("total", 3 * n + 1))}
        rows.append(row("connections", {"kind": "queues", "queues": n, "concurrency": 32}, served))
    rows.append(row("connections", {"kind": "memory", "connections": 100},
                    {"bytes_per_connection": metric(20_000, "B")}, extra=None))
    rows += [row("connections", {"kind": "pool", "pool_size": p, "concurrency": c, "jobs": 500},
                 {"jobs_per_s": metric(BASE * min(p, c // 4), "1/s")})
             for c in (8, 32) for p in (2, 8, 32)]
    rows.append(row("connections", {"kind": "too-small", "pool_size": 1, "concurrency": 32,
                                    "pool_timeout": 0.05},
                    {"failed_calls": metric(7, "count", spread=0.0, reps=1)},
                    extra={"exception_type": "ConnectionError",
                           "exception_message": "No connection available."}))
    return rows


SERVERS = [
    {"id": "valkey-9.1", "family": "valkey", "version": "9.1.2", "allocator": "libc",
     "measured": True, "reason": None, "command": None,
     "configs": {"default": {"flags": ["--save", ""], "mode": None, "threads": None}}},
    {"id": "redis-7.0", "family": "redis", "version": "7.0.15", "allocator": "jemalloc-5.3.0",
     "measured": True, "reason": None, "command": None,
     "configs": {"default": {"flags": ["--save", ""], "mode": None, "threads": None}}},
    {"id": "dragonfly", "family": "dragonfly", "version": None, "allocator": None,
     "measured": False, "reason": "no dragonfly binary (set DRAGONFLY_BIN)",
     "command": "DRAGONFLY_BIN=/path/to/dragonfly nox -s bench -- --servers dragonfly",
     "configs": {}},
]


def make_run(run_id: str = "20261129T201500Z-ab12cd", created: str = "2026-11-29T20:15:00Z",
             quick: bool = False) -> dict[str, Any]:
    """A complete result document with every scenario."""
    results = lifecycle_rows("valkey-9.1", 1.0) + lifecycle_rows("redis-7.0", 0.8)
    results += variant_rows() + other_rows()
    headline = next(r for r in results if r["scenario"] == "process" and r["config"] == "default"
                    and r["protocol"] == 3 and r["parser"] == "hiredis"
                    and r["params"]["concurrency"] == 32)
    headline["headline"] = {"metric": "jobs_per_s",
                            "conditions": "synthetic worker, 32 no-op handlers at once"}
    return {
        "schema_version": 1, "run_id": run_id, "created_utc": created,
        "conveyor_version": "0.1.0", "git": {"commit": "0123456789abcdef", "dirty": False},
        "command": ["python", "-m", "bench", "--quick"] if quick else ["python", "-m", "bench"],
        "environment": {"python": "3.11.7", "implementation": "CPython", "os": "Linux",
                        "kernel": "6.1.0", "cpu_model": "Test CPU", "cores": 2,
                        "memory_bytes": 8 * 1024**3, "machine_label": "synthetic"},
        "clients": {"redis_py": "8.1.0", "hiredis": "3.5.0", "conveyor": "0.1.0"},
        "method": {"repetitions": 1 if quick else 3, "warmup": 0 if quick else 1,
                   "process_per_repetition": True, "quick": quick,
                   "statistics": "median, MAD, min, max of per-repetition values",
                   "process_per_case": True, "flush_per_case": True,
                   "case_order": "cases in plan order, one process each", "complete": True},
        "library_defaults": {"queue.pool_size": 16, "queue.maintenance_batch": 100,
                             "queue.lease": 30.0, "worker.concurrency": 1},
        "servers": copy.deepcopy(SERVERS),
        "results": results,
        "peers": peers_doc(),
    }


def make_dragonfly_run(run_id: str = "20261130T181041Z-df0001", created: str = "2026-11-30T18:10:41Z",
                       host_speed: float | None = None) -> dict[str, Any]:
    """A run of Valkey 9.1 and Dragonfly in its two lock modes (hashtag 1.2x, global 0.3x); with
    ``host_speed``, its Valkey 9.1 reference ceilings at that share of the main run's."""
    doc = make_run(run_id, created)
    doc["environment"]["machine_label"] = "dragonfly-host"
    flags = {"default": ["--cluster_mode=emulated", "--lock_on_hashtags"],
             "global-lock": ["--default_lua_flags=allow-undeclared-keys"]}
    doc["servers"] = [copy.deepcopy(SERVERS[0]),
                      {"id": "dragonfly", "family": "dragonfly", "version": "1.40.0",
                       "allocator": None, "measured": True, "reason": None, "command": None,
                       "configs": {name: {"flags": f, "mode": None, "threads": 2}
                                   for name, f in flags.items()}}]
    results = [r for r in other_rows() if r["scenario"] in ("process", "enqueue-single")]
    for config, k in (("default", 1.2), ("global-lock", 0.3)):
        for r in [r for r in other_rows() if r["scenario"] in ("process", "enqueue-single")]:
            rates = {n: metric(m["median"] * k, m["unit"]) for n, m in r["metrics"].items()}
            results.append({**r, "server": "dragonfly", "config": config, "metrics": rates})
    if host_speed is not None:
        for r in [r for r in other_rows() if r["scenario"] == "reference"]:
            rates = {n: metric(m["median"] * host_speed, m["unit"]) for n, m in r["metrics"].items()}
            results.append({**r, "metrics": rates})
    doc["results"] = results
    doc["failures"] = [{"scenario": "lifecycle", "server": "dragonfly", "config": "default",
                        "protocol": 3, "parser": "hiredis", "params": {"concurrency": 8},
                        "kind": "error", "error": "rep 4/5: KeyError: '6'"}]
    return doc


def peers_doc() -> dict[str, Any]:
    """A synthetic ``peers`` section: Conveyor and one peer 10x slower, one crash table."""
    rows = []
    for library, flavor, scale in (("conveyor", "Worker", 10.0), ("bullmq", "default", 1.0)):
        def add(scenario: str, params: dict[str, Any], name: str, value: float,
                unit: str = "1/s", **kw: Any) -> None:
            rows.append({"server": "valkey-9.1", "library": library, "flavor": flavor,
                         "scenario": scenario, "params": params, "status": "ok",
                         "metrics": {name: metric(value, unit)}, **kw})

        add("enqueue-single", {"api": "async", "jobs": 200}, "jobs_per_s", 300 * scale)
        add("enqueue-bulk", {"api": "bulk", "batch": 50, "jobs": 500}, "jobs_per_s", 900 * scale)
        for c in (1, 32, 100):
            add("process", {"concurrency": c, "jobs": 400}, "jobs_per_s", 50 * c * scale,
                counts={"enqueued": 400, "completed": 400, "lost": 0, "duplicated": 0})
        add("latency", {"jobs": 40}, "p50_ms", 10 / scale, "ms")
        add("memory", {"counts": [200, 600]}, "bytes_per_job", 200 + 100 / scale, "B")
    libraries = {name: {"requirements": [], "measured": True, "reason": None,
                        "versions": {"library": "1.0"}, "recovery_settings": {},
                        "retention": "nothing", "caveats": "synthetic",
                        "flavors": {flavor: {"settings": {}, "note": "synthetic"}}}
                 for name, flavor in (("conveyor", "Worker"), ("bullmq", "default"))}
    crash = [{"server": "valkey-9.1", "library": name, "fault": fault, "jobs": 100,
              "limit_s": 40.0, "status": "ok", "lost": 0, "run_twice": 0, "stuck": 0,
              "seconds_to_done": 1.5}
             for name in libraries for fault in ("sigkill", "server-restart", "connection-cut")]
    method = {"sizes": {"enqueue": 200, "bulk": 500, "process": 400, "latency": 40,
                        "memory": [200, 600, 1000], "concurrencies": [1, 32, 100]},
              "crash": {"jobs": 100, "sleep_s": 0.05, "concurrency": 10, "cut_s": 3.0,
                        "server_config": "aof-everysec"}}
    return {"method": method, "servers": [{"id": "valkey-9.1", "measured": True}],
            "libraries": libraries, "rows": rows, "crash": crash}
