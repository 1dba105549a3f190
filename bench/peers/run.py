"""``--libraries``: run the peer comparison and write one result file.

For every server: a fresh server (default configuration) for the speed scenarios, and a
fresh one with AOF (everysec) for the crash table. For every library: its venv (installed on
demand; an install failure is a "not measured" entry with pip's first error line), then
each row (flavour) through every scenario, then each fault.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console

from bench import environment
from bench.peers import LIBRARIES, Library, costs, crash, estimate, measure
from bench.peers.drive import Child, ChildFailed
from bench.peers.venvs import InstallError, python_for
from bench.plan import Options
from bench.results import RESULTS_DIR, SCHEMA_VERSION, write_results
from bench.scenarios._common import flush_sync, used_memory
from bench.servers import ServerStartError, ServerUnavailable, start_server
from bench.stats import STATISTICS_TEXT


class PeerRun:
    """One run over servers x libraries."""

    def __init__(self, opts: Options, libraries: list[str], console: Console,
                 command: list[str]) -> None:
        self.opts, self.names, self.console, self.command = opts, libraries, console, command
        self.size = "quick" if opts.quick else "full"
        self.timeout = min(opts.timeout, measure.CHILD_TIMEOUT[self.size])
        self.libraries: dict[str, dict[str, Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self.crash: list[dict[str, Any]] = []
        self.servers: list[dict[str, Any]] = []
        self.prior = estimate.newest_peers()  # earlier rates size the backlogs (never the figures)

    # ------------------------------------------------------------------ top level
    def run(self, started: float) -> int:
        pythons = {name: self._install(LIBRARIES[name]) for name in self.names}
        for server in self.opts.servers:
            self._server(server, pythons)
        path = write_results(self._document(), self._output())
        self._summary()
        self.console.print(f"Elapsed {time.monotonic() - started:.0f} s. Wrote [bold]{path}[/]")
        return 0

    def _output(self) -> Any:
        if self.opts.output is not None:
            return self.opts.output
        return RESULTS_DIR / "quick" if self.opts.quick else RESULTS_DIR

    def _install(self, lib: Library) -> str | None:
        """The library's interpreter, or None (recorded as not measured) when pip fails."""
        entry: dict[str, Any] = {
            "requirements": list(lib.requirements), "retention": lib.retention,
            "flavors": {f: {"settings": s, "note": lib.notes.get(f, ""),
                            **({"source": lib.sources[f]} if f in lib.sources else {}),
                            **({"only": f"process at concurrency {', '.join(map(str, lib.only[f]))}"
                                        " (no latency case)"} if f in lib.only else {})}
                        for f, s in lib.flavors.items()},
            "recovery_settings": lib.recovery, "concurrency_note": lib.concurrency_note,
            "caveats": lib.caveats, "measured": False, "reason": None, "versions": {},
        }
        self.libraries[lib.name] = entry
        self.console.print(f"[bold]{lib.name}[/]: preparing its environment")
        try:
            python = python_for(lib)
            info = Child(lib, python, "redis://127.0.0.1:1/0", {}).call("info", 120.0)
        except (InstallError, ChildFailed) as exc:
            entry["reason"] = f"install failed: {exc}"
            self.console.print(f"[yellow]{lib.name}: not measured: {entry['reason']}[/]")
            return None
        entry.update(measured=True, versions=info["versions"],
                     api={"sync": info["sync_enqueue"], "async": info["async_enqueue"],
                          "bulk": info["bulk"]})
        return python

    # ------------------------------------------------------------------ servers
    def _server(self, server: str, pythons: dict[str, str | None]) -> None:
        record: dict[str, Any] = {"id": server, "measured": False, "reason": None}
        self.servers.append(record)
        try:
            with start_server(server, "default") as srv:
                record.update(measured=True, **{k: v for k, v in srv.record().items()
                                                if k in ("family", "version", "allocator")})
                for name, python in pythons.items():
                    if python:
                        self._speed(server, srv, LIBRARIES[name], python)
            with start_server(server, "aof-everysec") as srv:
                for name, python in pythons.items():
                    if python:
                        self._crash(server, srv, LIBRARIES[name], python)
        except (ServerUnavailable, ServerStartError) as exc:
            record["reason"] = getattr(exc, "reason", str(exc))
            self.console.print(f"[yellow]{server}: not measured: {record['reason']}[/]")

    def _flusher(self, srv: Any) -> Any:
        def flush() -> None:
            client = srv.client()
            try:
                flush_sync(client, everything=True)
            finally:
                client.close()
        return flush

    def _used_memory(self, srv: Any) -> Any:
        def used() -> int:
            client = srv.client()
            try:
                return used_memory(client)
            finally:
                client.close()
        return used

    # ------------------------------------------------------------------ speed
    def _speed(self, server: str, srv: Any, lib: Library, python: str) -> None:
        sizes = measure.SIZES[self.size]
        api = self.libraries[lib.name]["api"]
        for position, (flavor, settings) in enumerate(lib.flavors.items()):
            child = Child(lib, python, srv.url, settings)
            row = measure.Row(child, self._flusher(srv), self._used_memory(srv),
                              repetitions=self.opts.repetitions, timeout=self.timeout,
                              stats=costs.server_stats(srv.client))
            row.known = estimate.known_rates(self.prior, lib.name, flavor)
            # A library's rows differ only in worker settings: enqueue and memory run once.
            producer = position == 0
            concurrencies, latency = lib.cases(flavor, sizes["concurrencies"])
            self._row(row, self._adder(server, lib.name, flavor), api,
                      {**sizes, "concurrencies": concurrencies}, producer, latency=latency)

    @staticmethod
    def _row(row: measure.Row, add: Any, api: dict[str, Any], sizes: dict[str, Any],
             producer: bool, *, latency: bool = True) -> None:
        """Every scenario of one library row."""
        if producer:
            timed = {"min_seconds": sizes["enqueue_s"]}
            for kind in ("sync", "async"):
                if api[kind]:
                    add("enqueue-single", {"api": kind, **timed},
                        lambda k=kind: row.enqueue(sizes["enqueue_s"], k))
            bulk = {"api": "bulk", "batch": 50, **timed}
            if api["bulk"]:
                add("enqueue-bulk", bulk, lambda: row.enqueue(sizes["enqueue_s"], "bulk"))
            else:
                add("enqueue-bulk", bulk, None, status="no bulk API")
            add("memory", {"counts": sizes["memory"]}, lambda: row.memory(sizes["memory"]))
        for c in sizes["concurrencies"]:
            add("process", {"concurrency": c, "min_seconds": sizes["process_s"]},
                lambda c=c: row.process(c, sizes))
        if latency:
            add("latency", {"jobs": sizes["latency"], "max_seconds": sizes["latency_s"]},
                lambda: row.latency(sizes["latency"], sizes["latency_s"]))

    def _adder(self, server: str, library: str, flavor: str) -> Any:
        def add(scenario: str, params: dict[str, Any], fn: Any, status: str = "ok") -> None:
            label = f"{server} {library}/{flavor} {scenario} {params.get('api') or ''}" \
                    f"{params.get('concurrency') or ''}"
            began = time.monotonic()
            outcome = measure.run_guarded(fn) if fn else {"status": status}
            self.rows.append({"server": server, "library": library, "flavor": flavor,
                              "scenario": scenario, "params": params, **outcome,
                              "wall_s": round(time.monotonic() - began, 1)})
            shown = outcome["status"] if outcome["status"] != "ok" else _headline(outcome)
            self.console.print(f"  {label}: {shown} ({time.monotonic() - began:.1f} s)")
        return add

    # ------------------------------------------------------------------ crash
    def _crash(self, server: str, srv: Any, lib: Library, python: str) -> None:
        def make_child(url: str) -> Child:
            return Child(lib, python, url, lib.recovery)

        for fault in crash.FAULTS:
            self._flusher(srv)()
            began = time.monotonic()
            rec = crash.run_fault(fault, make_child, srv, crash.SIZES[self.size], self.timeout)
            self.crash.append({"server": server, "library": lib.name, **rec})
            shown = rec.get("error") or (f"lost={rec['lost']} twice={rec['run_twice']} "
                                         f"stuck={rec['stuck']} done={rec['seconds_to_done']}")
            self.console.print(f"  {server} {lib.name} crash {fault}: {shown} "
                               f"({time.monotonic() - began:.1f} s)")

    # ------------------------------------------------------------------ output
    def _document(self) -> dict[str, Any]:
        clients = environment.clients()
        return {
            "schema_version": SCHEMA_VERSION, "run_id": environment.run_id(),
            "created_utc": environment.utc_timestamp(),
            "conveyor_version": clients["conveyor"] or "unknown",
            "git": environment.git_state(), "command": self.command,
            "environment": environment.environment(), "clients": clients,
            "method": {"repetitions": self.opts.repetitions, "warmup": 0,
                       "process_per_repetition": True, "quick": self.opts.quick,
                       "statistics": STATISTICS_TEXT, "protocols": [], "parsers": [],
                       "params": {}},
            "servers": [], "results": [], "failures": [],
            "peers": {
                "method": {"sizes": measure.SIZES[self.size], "repetitions": self.opts.repetitions,
                           "producer_rows": "enqueue and memory run on each library's first row "
                                            "only: its other rows differ in worker settings alone",
                           "crash": {
                    **crash.SIZES[self.size], "sleep_s": crash.SLEEP,
                    "concurrency": crash.CONCURRENCY, "cut_s": crash.CUT_S,
                    "server_config": "aof-everysec"},
                    "timeout_s": self.timeout, "payload_bytes": 64,
                    "latency_warmup_jobs": measure.LATENCY_WARMUP},
                "servers": self.servers, "libraries": self.libraries,
                "rows": self.rows, "crash": self.crash,
            },
        }

    def _summary(self) -> None:
        for name, lib in self.libraries.items():
            if not lib["measured"]:
                self.console.print(f"[yellow]{name}: not measured: {lib['reason']}[/]")
        bad = [r for r in self.rows if r["status"] not in ("ok", "no bulk API")]
        for r in bad:
            self.console.print(f"[red]{r['server']} {r['library']}/{r['flavor']} "
                               f"{r['scenario']} {r['params']}: {r['status']}: {r.get('error')}[/]")


def _headline(outcome: dict[str, Any]) -> str:
    """A short figure for the progress line."""
    metrics = outcome["metrics"]
    name = next(iter(metrics))
    return f"{name}={metrics[name]['median']:,.1f}"
