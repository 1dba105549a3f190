"""Executes a :class:`bench.plan.Plan`: servers, progress, result file, summary table."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import redis
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from bench import environment, headlines, scenarios
from bench.harness import WARMUP_SCALE, Cell, CellOutcome, cell_failure, measure_cell
from bench.plan import (
    CellSpec,
    ConfigPlan,
    Options,
    Plan,
    ServerPlan,
    client_variants_server,
    fill_external,
)
from bench.results import RESULTS_DIR, SCHEMA_VERSION, ResultsError, write_results
from bench.scenarios._common import BESIDE, INJECT_ENV, Target, flush_sync
from bench.servers import (
    ServerStartError,
    ServerUnavailable,
    connect_external,
    is_empty,
    redact_url,
    start_server,
)
from bench.stats import STATISTICS_TEXT, relative_mad

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
CASE_ORDER = ("warm-up: the cell's first case, time-bound sizes scaled by warmup_scale, discarded; "
              "then round-robin: repetition r of every case of a cell before repetition r + 1, "
              "cases in the listed order; each case in its own process after its own server flush")


class Runner:
    """Runs the plan and writes one result file."""

    def __init__(self, opts: Options, plan: Plan, console: Console, command: list[str]) -> None:
        self.opts, self.plan, self.console, self.command = opts, plan, console, command
        self.results: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.servers: list[dict[str, Any]] = []
        self._progress: Progress | None = None
        self._task: Any = None
        self._externals: dict[str, Any] = {}
        self.timing: dict[str, float] = {}
        self._doc: dict[str, Any] = {}
        self._path: Path = Path()
        self._current: dict[str, Any] | None = None  # the server being measured
        self._cells_done = 0

    # ------------------------------------------------------------------ top level
    def run(self, started: float) -> int:
        """Check external servers, measure everything, write the file, print the summary.

        The file is rewritten after every cell (``method.complete`` false until the end), so a
        run that dies keeps everything measured before.
        """
        if not self._prepare_external():
            return EXIT_REFUSED
        self._doc = self._skeleton()
        self._path = self._output()
        total = sum(c.warmup + c.repetitions for c in self.plan.cells)
        with self._progress_bar(total) as progress:
            self._progress = progress
            for sp in self.plan.servers:
                self.servers.append(self._run_server(sp))
        path = self._write(complete=True)
        self._summary(path, time.monotonic() - started)
        return EXIT_FAILED if self.failures else EXIT_OK

    def _write(self, complete: bool) -> Path:
        """(Re)write the result file with everything measured so far."""
        servers = [*self.servers, *([self._current] if self._current else [])]
        self._doc.update(servers=servers, results=self.results, failures=self.failures)
        self._doc["method"].update(cell_seconds=self.timing, complete=complete)
        self._path = write_results(self._doc, self._path)
        return self._path

    def _output(self) -> Path:
        """Where to write: --output, else results/ (quick runs under results/quick/)."""
        if self.opts.output is not None:
            return self.opts.output
        return RESULTS_DIR / "quick" if self.opts.quick else RESULTS_DIR

    def _skeleton(self) -> dict[str, Any]:
        """Everything in the result file except servers and results."""
        clients = environment.clients()
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": environment.run_id(),
            "created_utc": environment.utc_timestamp(),
            "conveyor_version": clients["conveyor"] or "unknown",
            "git": environment.git_state(),
            "command": self.command,
            "environment": environment.environment(),
            "clients": clients,
            "library_defaults": headlines.library_defaults(),
            "method": {
                "repetitions": self.opts.repetitions, "warmup": self.opts.warmup,
                "process_per_repetition": True, "quick": self.opts.quick,
                "process_per_case": True, "flush_per_case": True, "case_order": CASE_ORDER,
                "complete": False, "headlines": headlines.declarations(self.opts.scenarios),
                "client_variants": self.opts.client_variants,
                "warmup_scale": WARMUP_SCALE,
                "client_variants_server": client_variants_server(self.plan, self.opts),
                "statistics": STATISTICS_TEXT,
                "protocols": self.opts.protocols, "parsers": self.opts.parsers,
                "params": self.opts.params, "loop": self.opts.loop,
                "client_install_bytes": environment.install_sizes(),
                # only when not the default, so default runs keep the method of earlier files
                **({"driver": self.opts.driver} if self.opts.driver != "redis-py" else {}),
                **({"beside": self.opts.beside} if self.opts.beside else {}),
            },
        }

    def _progress_bar(self, total: int) -> AbstractContextManager[Any]:
        """A rich progress bar (what runs, M/N, elapsed, time left)."""
        progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self._task = progress.add_task("starting", total=max(total, 1))
        return progress if total else nullcontext(progress)

    # ------------------------------------------------------------------ external servers
    def _prepare_external(self) -> bool:
        """Announce the flush policy, identify external servers, refuse non-empty ones."""
        for sp in self.plan.servers:
            if sp.external_url is None:
                continue
            shown = redact_url(sp.external_url)
            self.console.print(
                f"[yellow]External server {sp.id} at {shown}: it will NOT be flushed unless its "
                "database is empty or you pass --force-flush. Once accepted, the benchmark "
                "flushes that database between repetitions and resets its statistics "
                "(CONFIG RESETSTAT).[/]"
            )
            try:
                ext = connect_external(sp.external_url, sp.id)
                empty = is_empty(sp.external_url)
            except ServerUnavailable as exc:
                self.console.print(f"[red]Refusing: {exc.reason}[/]")
                return False
            if not empty and not self.opts.force_flush:
                self.console.print(
                    f"[red bold]Refusing to run on {sp.id} ({shown}): its database holds keys. "
                    "Point --server-url at an empty database, or pass --force-flush to allow "
                    "the benchmark to FLUSHDB it.[/]"
                )
                return False
            self._externals[sp.id] = ext
            first = client_variants_server(self.plan, self.opts)
            fill_external(sp, ext.family, self.opts, client=first in (None, sp.id))
        return True

    # ------------------------------------------------------------------ servers
    def _run_server(self, sp: ServerPlan) -> dict[str, Any]:
        """Measure every configuration of one server; return its servers[] record."""
        record: dict[str, Any] = {
            "id": sp.id, "family": sp.family, "version": None, "allocator": None,
            "measured": False, "reason": sp.reason, "command": sp.command,
            "external": sp.external_url is not None,
            "url": redact_url(sp.external_url) if sp.external_url else None, "configs": {},
        }
        if sp.reason is not None:
            self.console.print(f"[yellow]{sp.id}: not measured: {sp.reason}[/]")
            return record
        self._current = record
        for cfg in sp.configs:
            record["configs"][cfg.label] = self._run_config(sp, cfg, record)
        self._current = None
        if not record["measured"] and record["reason"] is None:
            record["reason"] = "no configuration could be started"
        return record

    def _run_config(
        self, sp: ServerPlan, cfg: ConfigPlan, record: dict[str, Any]
    ) -> dict[str, Any]:
        """Start a fresh server for ``cfg`` (or use the external one) and run its cells."""
        if cfg.not_applicable:
            return {"flags": [], "mode": cfg.mode, "threads": None, "applicable": False,
                    "reason": cfg.not_applicable}
        try:
            with self._server(sp, cfg) as srv:
                rec = srv.record()
                record.update(version=rec["version"], allocator=rec["allocator"], measured=True,
                              family=rec["family"])
                entry = {"flags": rec["flags"], "mode": rec["mode"], "threads": rec["threads"],
                         "applicable": True, "reason": None}
                record["configs"][cfg.label] = entry  # visible in files written meanwhile
                for spec in cfg.cells:
                    self._run_cell(spec, srv, sp)
                return entry
        except (ServerUnavailable, ServerStartError) as exc:
            reason = getattr(exc, "reason", str(exc))
            self._skip_cells(cfg.cells)
            self.failures.append({"scenario": "*", "server": sp.id, "config": cfg.label,
                                  "kind": "server-start", "error": reason})
            return {"flags": [], "mode": cfg.mode, "threads": None, "applicable": False,
                    "reason": reason}

    def _server(self, sp: ServerPlan, cfg: ConfigPlan) -> AbstractContextManager[Any]:
        """A fresh local server, or the external one (already checked)."""
        if sp.external_url is not None:
            return nullcontext(self._externals[sp.id])
        return start_server(sp.id, cfg.launcher_config, dragonfly_mode=cfg.mode or "hashtag")

    def _flusher(self, srv: Any) -> Callable[[], None]:
        """Empty the server (ours: FLUSHALL; external: FLUSHDB of its database) between reps."""
        external = hasattr(srv, "display_url")

        def flush() -> None:
            client = srv.client() if not external else redis.Redis.from_url(srv.url)
            try:
                flush_sync(client, everything=not external)
            finally:
                client.close()

        return flush

    def _skip_cells(self, cells: list[CellSpec]) -> None:
        """Advance the progress bar past cells that cannot run."""
        if self._progress is not None:
            steps = sum(c.warmup + c.repetitions for c in cells)
            self._progress.advance(self._task, steps)

    def _run_cell(self, spec: CellSpec, srv: Any, sp: ServerPlan) -> None:
        """Measure one cell and collect its results and failures."""
        v = spec.variant
        target = Target(
            server=sp.id, family=srv.family, version=srv.version, config=v.config, url=srv.url,
            protocol=v.protocol, parser=v.parser, external=sp.external_url is not None,
            mode=getattr(srv, "mode", None), loop=self.opts.loop,
            driver="glide" if self.opts.driver == "glide" else "redis-py",
        )
        planned = spec.warmup + spec.repetitions
        done = 0
        began = time.monotonic()

        def on_step(label: str) -> None:
            nonlocal done
            if done and self._progress is not None:
                self._progress.advance(self._task)
            done += 1
            if self._progress is not None:
                self._progress.update(self._task, description=label)
                self._log_line(label)

        cell = Cell(spec.scenario, target, spec.cases)
        try:
            outcome = measure_cell(cell, spec.repetitions, spec.warmup,
                                   between=self._flusher(srv), on_step=on_step,
                                   timeout=self.opts.timeout)
        except Exception as exc:  # a harness bug in one cell must not lose the whole run
            outcome = CellOutcome(failures=[cell_failure(cell, "harness", exc)])
        if self._progress is not None:
            self._progress.advance(self._task, planned - done + 1 if done else planned)
        self.timing[spec.label] = round(time.monotonic() - began, 2)
        for row in outcome.results:  # a --beside twin is never its scenario's headline row
            twin = any(row["params"].get(k) == v for b in spec.beside for k, v in BESIDE[b].items())
            headlines.mark(row, spec.variant.primary and not twin)
        self.results += outcome.results
        for failure in outcome.failures:
            self.console.print(f"[red bold]FAILED[/] {spec.label} {failure.get('params', '')}: "
                               f"{failure['kind']}: {failure['error']}")
        self.failures += outcome.failures
        try:
            self._write(complete=False)
        except ResultsError as exc:  # kept as *.json.invalid; the final write reports it
            self.console.print(f"[red]could not write the partial result file: {exc}[/]")
        self._cells_done += 1
        _maybe_die(self._cells_done)

    def _log_line(self, label: str) -> None:
        """Without a terminal (CI logs) the live bar is hidden: print one line per step."""
        if self.console.is_terminal or self._progress is None:
            return
        task = self._progress.tasks[0]
        left = f", ~{task.time_remaining:.0f} s left" if task.time_remaining else ""
        self.console.print(f"[{task.completed:.0f}/{task.total:.0f}{left}] {label}")

    # ------------------------------------------------------------------ summary
    def _summary(self, path: Path, elapsed: float) -> None:
        """Print the summary table, noise, failures and the path written."""
        table = Table(title="Conveyor benchmark summary (median of repetitions)")
        for col in ("scenario", "server/config/protocol/parser", "params", "metric", "median",
                    "MAD %"):
            table.add_column(col, justify="right" if col in ("median", "MAD %") else "left")
        for r in self.results:
            name = _headline(r)
            m = r["metrics"][name]
            variant = f"{r['server']}/{r['config']}/resp{r['protocol']}/{r['parser']}"
            table.add_row(r["scenario"], variant, _short(r["params"]), name,
                          _num(m["median"]), f"{100 * relative_mad(m):.1f}")
        self.console.print(table)
        for s in self.servers:
            if not s["measured"]:
                self.console.print(f"[yellow]{s['id']}: not measured: {s['reason']}[/]"
                                   + (f"\n  to measure it: {s['command']}" if s["command"] else ""))
        self._print_noise()
        for f in self.failures:
            where = f"{f['server']}/{f['config']}/resp{f.get('protocol', '?')}/{f.get('parser', '?')}"
            self.console.print(f"[red bold]FAILURE[/] {f['scenario']} @ {where} "
                               f"{_short(f.get('params', {}))}: {f['kind']}: {f['error']}")
        self.console.print(f"Elapsed {elapsed:.0f} s. Wrote [bold]{path}[/]")
        if self.failures:
            self.console.print(f"[red bold]{len(self.failures)} failure(s): the run FAILED.[/]")

    def _print_noise(self) -> None:
        """Median and max of MAD/median over all metrics with more than one repetition."""
        noise = [(relative_mad(m), f"{r['scenario']}.{n}") for r in self.results
                 for n, m in r["metrics"].items() if len(m["values"]) > 1]
        if noise:
            worst = max(noise)
            self.console.print(
                f"Noise (MAD/median): median {100 * statistics.median(x for x, _ in noise):.1f}%, "
                f"max {100 * worst[0]:.1f}% ({worst[1]})"
            )


def _maybe_die(cells_done: int) -> None:
    """Test hook (``BENCH_INJECT=die-after-cells:N``): the run dies abruptly after N cells."""
    kind, _, count = os.environ.get(INJECT_ENV, "").partition(":")
    if kind == "die-after-cells" and cells_done >= int(count):
        os._exit(70)


def _headline(result: dict[str, Any]) -> str:
    """The metric shown in the summary for a result row."""
    module = scenarios.load(result["scenario"])
    for name in getattr(module, "HEADLINE", ()):
        if name in result["metrics"]:
            return str(name)
    return next(iter(result["metrics"]))


def _num(value: float) -> str:
    """Readable number: thousands separators for large values, 3 significant digits else."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _short(params: dict[str, Any]) -> str:
    """Compact params text for the table."""
    text = " ".join(f"{k}={v}" for k, v in params.items() if not isinstance(v, list | dict))
    return text[:48]
