"""Command line of the benchmark suite: ``python -m bench`` (``nox -s bench -- ARGS``).

With no arguments: the full default matrix on every server this machine can start, a fresh
server per configuration, a progress bar, a summary table, and one JSON result file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import estimate, scenarios
from bench.peers import LIBRARIES
from bench.peers import resolve as resolve_libraries
from bench.plan import DEFAULT_CONFIGS, DRAGONFLY_GLOBAL, Options, build_plan
from bench.runner import Runner
from bench.scenarios._common import BESIDE, DRIVER_SCENARIOS, DRIVERS, LOOPS
from bench.servers import CONFIGS, KINDS

KIND_IDS = tuple(kind.id for kind in KINDS)
DEFAULT_SERVERS = ("valkey-9.1", "valkey-8.1", "redis-8.2", "redis-7.0", "dragonfly")

EPILOG = """\
examples:
  python -m bench                                   full default matrix, every local server
  python -m bench --quick                           smoke run of every scenario (< 2 min)
  python -m bench --servers valkey-9.1 --scenarios process,lifecycle
  python -m bench --scenarios failover --servers valkey-9.1,redis-8.2   primaries killed (opt-in)
  python -m bench --server-url mine=redis://host:6379/0   a server you run (never flushed
                                                    unless empty, or with --force-flush)
  python -m bench --param lifecycle.min_seconds=5 --param memory.counts=[1000,10000]
  DRAGONFLY_BIN=/path/to/dragonfly python -m bench --servers dragonfly
"""


def _csv(text: str) -> list[str]:
    """Split a comma-separated option."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _ints(text: str) -> list[int]:
    """Comma-separated integers."""
    return [int(p) for p in _csv(text)]


def parser() -> argparse.ArgumentParser:
    """The argparse parser for ``python -m bench``."""
    p = argparse.ArgumentParser(
        prog="python -m bench", description="Conveyor benchmark suite.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--servers", type=_csv, default=None,
                   help=f"server kinds (default: {','.join(DEFAULT_SERVERS)}; with --server-url "
                        "and no --servers, only the external servers)")
    p.add_argument("--configs", type=_csv, default=",".join(DEFAULT_CONFIGS),
                   help="server configurations (default: %(default)s; dragonfly also has "
                        "global-lock)")
    p.add_argument("--scenarios", type=_csv, default=",".join(scenarios.DEFAULT),
                   help="scenarios (default: %(default)s; opt-in: "
                        f"{','.join(scenarios.OPT_IN)})")
    p.add_argument("--protocols", type=_ints, default="3,2", help="RESP versions (default 3,2)")
    p.add_argument("--parsers", type=_csv, default="hiredis,python",
                   help="reply parsers (default hiredis,python)")
    p.add_argument("--client-variants", choices=("first", "all"), default="first",
                   help="run the RESP2 and Python-parser variations on the first server only "
                        "(default; they measure the client) or on every server")
    p.add_argument("--repetitions", type=int, default=None,
                   help="measured repetitions (default 5; 1 with --quick)")
    p.add_argument("--warmup", type=int, default=None,
                   help="discarded warm-up repetitions (default 1; 0 with --quick)")
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, 1 repetition")
    p.add_argument("--output", type=Path, default=None,
                   help="result file (*.json) or directory (default results/, quick runs "
                        "under results/quick/)")
    p.add_argument("--server-url", action="append", default=[], metavar="NAME=URL",
                   help="measure a server you run elsewhere (repeatable)")
    p.add_argument("--force-flush", action="store_true",
                   help="allow flushing an external server's database that holds keys")
    p.add_argument("--param", action="append", default=[], metavar="SCENARIO.KEY=VALUE",
                   help="override a scenario size option (value parsed as JSON)")
    p.add_argument("--loop", choices=LOOPS, default="asyncio",
                   help="event loop for the asyncio parts of scenarios (default %(default)s); "
                        "recorded in the run's method and, when not the default, in each "
                        "result's params")
    p.add_argument("--driver", choices=DRIVERS, default="redis-py",
                   help="Conveyor's client library (default %(default)s, with the --parsers "
                        "variants); redis-py-pure = redis-py with its pure-Python parser only; "
                        "glide = valkey-glide. Not the default: recorded in each result's params, "
                        f"and only {', '.join(DRIVER_SCENARIOS)} run")
    p.add_argument("--beside", type=_csv, default=[], metavar="OPTIONS",
                   help=f"runtime options ({', '.join(BESIDE)}) measured beside the run's own in "
                        "the same run: every case of each server's baseline variant gets a twin on "
                        "each option, run right after it (glide: the driver scenarios only)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds allowed per repetition process (default %(default)s)")
    p.add_argument("--libraries", type=_csv, default=["conveyor"],
                   help="conveyor (default: the Conveyor matrix), or a comma-separated list of "
                        "libraries for the peer comparison (all = every peer and Conveyor); "
                        "see bench/peers/")
    p.add_argument("--list", action="store_true", help="print the plan and exit")
    return p


def parse_params(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["lifecycle.min_seconds=5"]`` -> ``{"lifecycle": {"min_seconds": 5}}``."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        scenario, dot, name = key.partition(".")
        if not (sep and dot and name):
            raise SystemExit(f"--param {item!r}: expected SCENARIO.KEY=VALUE")
        if scenario not in scenarios.ORDER:
            raise SystemExit(f"--param {item!r}: unknown scenario {scenario!r}; choose from "
                             f"{', '.join(scenarios.ORDER)}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(scenario, {})[name] = value
    return out


def parse_urls(items: Sequence[str]) -> dict[str, str]:
    """``["name=redis://..."]`` -> ``{"name": "redis://..."}``."""
    urls: dict[str, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or "://" not in url:
            raise SystemExit(f"--server-url {item.split('=')[0]!r}: expected NAME=URL")
        urls[name] = url
    return urls


def options_from_args(args: argparse.Namespace) -> Options:
    """Validate arguments and build run options."""
    urls = parse_urls(args.server_url)
    servers = args.servers if args.servers is not None else ([] if urls else list(DEFAULT_SERVERS))
    if not servers and not urls:
        raise SystemExit("--servers: name at least one server (or pass --server-url NAME=URL)")
    if (args.repetitions is not None and args.repetitions < 1) or (args.warmup or 0) < 0:
        raise SystemExit("--repetitions must be at least 1 and --warmup at least 0")
    bad_servers = [s for s in servers if s not in KIND_IDS]
    if bad_servers:
        raise SystemExit(f"unknown server(s) {bad_servers}; choose from {', '.join(KIND_IDS)} "
                         "(or measure your own with --server-url NAME=URL)")
    unknown = [s for s in args.scenarios if s not in scenarios.ORDER]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose from {', '.join(scenarios.ORDER)}")
    bad_configs = [c for c in args.configs if c not in (*CONFIGS, DRAGONFLY_GLOBAL)]
    if bad_configs or not args.configs:
        raise SystemExit(f"unknown config(s) {bad_configs}; choose from "
                         f"{', '.join((*CONFIGS, DRAGONFLY_GLOBAL))}")
    bad_parsers = [p for p in args.parsers if p not in ("hiredis", "python")]
    if bad_parsers or any(p not in (2, 3) for p in args.protocols):
        raise SystemExit("--parsers takes hiredis,python and --protocols takes 2,3")
    if "hiredis" in args.parsers and importlib.util.find_spec("hiredis") is None:
        raise SystemExit("hiredis is not installed: `pip install hiredis`, or pass --parsers python")
    if args.loop != "asyncio" and importlib.util.find_spec(args.loop) is None:
        raise SystemExit(f"--loop {args.loop}: the {args.loop} package is not installed here "
                         "(it is in the bench dependency group: use `nox -s bench`)")
    scenario_names, parsers, missing = driver_choice(args.driver, args.scenarios, args.parsers)
    check_beside(args.beside, args.loop, args.driver)
    return Options(
        servers=servers, configs=args.configs, scenarios=scenario_names,
        protocols=args.protocols, parsers=parsers, quick=args.quick,
        repetitions=args.repetitions or (1 if args.quick else 5),
        warmup=args.warmup if args.warmup is not None else (0 if args.quick else 1),
        external=urls, force_flush=args.force_flush, params=parse_params(args.param),
        timeout=args.timeout, output=args.output, client_variants=args.client_variants,
        loop=args.loop, driver=args.driver, driver_missing=missing, beside=args.beside,
    )


def check_beside(beside: list[str], loop: str, driver: str) -> None:
    """Refuse a --beside option that is unknown, repeated, the run's own, or not installed."""
    unknown = [b for b in beside if b not in BESIDE]
    if unknown:
        raise SystemExit(f"--beside: unknown option(s) {unknown}; choose from {', '.join(BESIDE)}")
    if len(set(beside)) != len(beside):
        raise SystemExit(f"--beside: {','.join(beside)} names an option twice")
    if ("uvloop" in beside and loop != "asyncio") or ("glide" in beside and driver != "redis-py"):
        raise SystemExit("--beside compares with the standard asyncio loop and redis-py: "
                         "leave --loop and --driver at their defaults")
    packages = {"uvloop": ("uvloop",), "glide": ("glide", "glide_sync")}
    missing = [m for b in beside for m in packages[b] if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"--beside {','.join(beside)}: {' and '.join(missing)} not installed in this "
                         "interpreter (uvloop and valkey-glide are in the bench dependencies: "
                         "use `nox -s bench`)")


def driver_choice(driver: str, names: list[str], parsers: list[str]) -> tuple[list[str], list[str], str]:
    """Scenarios and parsers a --driver run measures, and why the driver cannot run ('' if it can).

    A driver that is not installed is not an error: its servers get "not measured" rows naming
    the reason (as for an interpreter nox cannot find)."""
    if driver == "redis-py":
        return names, parsers, ""
    kept = [n for n in names if n in DRIVER_SCENARIOS]
    if not kept:
        raise SystemExit(f"--driver {driver} measures only {', '.join(DRIVER_SCENARIOS)}")
    if driver == "redis-py-pure":
        return kept, ["python"], ""
    missing = [m for m in ("glide", "glide_sync") if importlib.util.find_spec(m) is None]
    reason = (f"driver glide: {' and '.join(missing)} not installed in this interpreter "
              "(pip install 'conveyor[glide]')") if missing else ""
    return kept, ["hiredis" if "hiredis" in parsers else parsers[0]], reason


def _list_peer_plan(console: Console, libraries: list[str], opts: Options) -> int:
    """Print what a peer run would measure and how long it should take, without installing
    or running anything."""
    from bench.peers import estimate, measure  # noqa: PLC0415 (only for peer runs)

    reps = opts.repetitions
    for server in opts.servers:
        for name in libraries:
            rows = ", ".join(LIBRARIES[name].flavors)
            console.print(f"{name} @ {server}: rows {rows}; speed scenarios ({reps} "
                          f"repetition{'s' * (reps > 1)}) and crash table")
    timeout = min(opts.timeout, measure.CHILD_TIMEOUT["quick" if opts.quick else "full"])
    typical, worst = (estimate.run_seconds(libraries, opts.servers, quick=opts.quick, reps=reps,
                                           timeout=timeout, worst=w) / 60 for w in (False, True))
    console.print(f"estimated duration on an idle 2-core machine: ~{typical:.0f} min "
                  f"(at most ~{worst:.0f} min if every crash-table fault waits its full limit)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(raw)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    libraries = resolve_libraries(args.libraries)
    opts = options_from_args(args)
    started = time.monotonic()
    if libraries != ["conveyor"] and args.list:
        return _list_peer_plan(console, libraries, opts)
    if libraries != ["conveyor"]:
        from bench.peers.run import PeerRun  # noqa: PLC0415 (only for peer runs)

        return PeerRun(opts, libraries, console, ["python", "-m", "bench", *raw]).run(started)
    plan = build_plan(opts)
    if args.list:
        for cell in plan.cells:
            console.print(f"{cell.label}: {len(cell.cases)} case(s)")
        seconds, priced = estimate.plan_estimate(plan, estimate.recorded_cells(opts.quick))
        console.print(f"estimated duration on an idle 2-core machine: ~{seconds / 60:.0f} min "
                      f"({priced} of {len(plan.cells)} cells priced by their time in a committed run)")
        return 0
    runner = Runner(opts, plan, console, command=["python", "-m", "bench", *raw])
    return runner.run(started)
