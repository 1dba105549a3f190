"""Repetition harness: one fresh process per repetition, warm-up discarded, statistics.

A *cell* is one scenario on one variant (server x configuration x protocol x parser)
with its list of cases (parameter sets). Each repetition of each case runs in a new
``python -m bench.worker`` process after a flush of the server. The first ``warmup``
repetitions run only the cell's first case, shortened, and are discarded. A case that fails
in any repetition (exactly-once violation, error, timeout, a metric that cannot be
aggregated) produces no figure: it becomes a failure record instead, the other cases go on,
and the run fails at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.scenarios._common import Target
from bench.stats import summarize

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 900.0
# A warm-up repetition runs the cell's first case in a fresh process with its time-bound sizes
# (min_seconds, duration_s, seconds) scaled by this: it warms the server and the OS, not the
# measured process, so it need not be as long.
WARMUP_SCALE = 0.25
SCALED_KEYS = ("min_seconds", "duration_s", "seconds")


class ExactlyOnceError(RuntimeError):
    """Raised by :func:`check_exactly_once` when a report shows a violation."""


@dataclass
class Cell:
    """One scenario on one target, with the cases to measure."""

    scenario: str
    target: Target
    cases: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """Human label for progress output."""
        t = self.target
        return f"{self.scenario} @ {t.server}/{t.config}/resp{t.protocol}/{t.parser}"


@dataclass
class CellOutcome:
    """Aggregated results and failures of one cell."""

    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


def library_path() -> Path:
    """The folder holding the `conveyor` package this process imports.

    Usually the repo's queue/; under `compare --suite head` the suite of one revision drives the
    library installed from another, and the measured children must import that same library.
    """
    import conveyor  # noqa: PLC0415 - resolved here, where the children are started

    return Path(conveyor.__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """Environment for worker processes: repo root and this process's library on PYTHONPATH."""
    env = dict(os.environ)
    paths = [str(REPO_ROOT), str(library_path())]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_repetition(
    scenario: str, target: Target, cases: list[dict[str, Any]], timeout: float = DEFAULT_TIMEOUT,
    repetition: int = 0,
) -> list[dict[str, Any]]:
    """Run ``cases`` of ``scenario`` once, in a fresh interpreter; return one outcome per case."""
    with tempfile.TemporaryDirectory(prefix="bench-rep-") as tmp:
        spec, out = Path(tmp, "spec.json"), Path(tmp, "out.json")
        spec.write_text(json.dumps({"scenario": scenario, "target": target.to_dict(),
                                    "cases": cases, "repetition": repetition}))
        cmd = [sys.executable, "-m", "bench.worker", str(spec), str(out)]
        try:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=child_env(), capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return [_fail("timeout", f"repetition exceeded {timeout:.0f} s")] * len(cases)
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout)[-2000:]
            msg = f"worker exited with {proc.returncode}: {tail.strip()}"
            return [_fail("crash", msg)] * len(cases)
        data = json.loads(out.read_text())
    wrong_parser = _check_parser(target, data)
    if wrong_parser:
        return [_fail("parser", wrong_parser)] * len(cases)
    return [check_exactly_once(o) for o in data["cases"]]


def _fail(kind: str, error: str) -> dict[str, Any]:
    """A failure outcome."""
    return {"ok": False, "kind": kind, "error": error}


def _check_parser(target: Target, data: dict[str, Any]) -> str | None:
    """Why the repetition used another parser than requested, or None when it did not."""
    if data.get("hiredis_active") != (target.parser == "hiredis"):
        return (f"parser {target.parser!r} requested but redis-py reported "
                f"HIREDIS_AVAILABLE={data.get('hiredis_active')} (is hiredis installed?)")
    return None


def check_exactly_once(outcome: dict[str, Any]) -> dict[str, Any]:
    """Turn a successful outcome whose exactly-once report is wrong into a failure."""
    report = outcome.get("exactly_once") if outcome.get("ok") else None
    if report is None:
        return outcome
    bad = (report["duplicates"] or report["lost"] or not report["ok"]
           or report["acked"] != report["enqueued"])
    if bad:
        detail = ", ".join(f"{k}={v}" for k, v in report.items())
        return {"ok": False, "kind": "exactly-once", "error": f"exactly-once violated: {detail}",
                "report": report}
    return outcome


def measure_cell(
    cell: Cell,
    repetitions: int,
    warmup: int,
    *,
    between: Callable[[], None] = lambda: None,
    on_step: Callable[[str], None] = lambda _label: None,
    timeout: float = DEFAULT_TIMEOUT,
) -> CellOutcome:
    """Run warm-up and measured repetitions of ``cell`` and aggregate them.

    Every case of every repetition runs in its own process after its own flush
    (``between``), so no case inherits another's keys, connections or warm caches.
    Repetitions go round-robin: repetition r of every case before repetition r + 1.
    """
    active = list(range(len(cell.cases)))
    measured: dict[int, list[dict[str, Any]]] = {i: [] for i in active}
    failures: dict[int, dict[str, Any]] = {}
    for rep in range(warmup + repetitions):
        if not active:
            break
        kind = "warm-up" if rep < warmup else f"rep {rep - warmup + 1}/{repetitions}"
        on_step(f"{cell.label} ({kind})")
        # A warm-up warms the server and the OS for this scenario: one short run of the
        # first case is enough (the measured process is always a fresh one).
        for i in list(active) if rep >= warmup else active[:1]:
            outcome = _run_case(cell, i, rep, between, timeout, warmup=rep < warmup)
            if not outcome["ok"]:
                failures[i] = _failure_record(cell, i, outcome, kind)
                active.remove(i)
            elif rep >= warmup:
                measured[i].append(outcome)
    results = []
    for i in active:
        try:
            results.append(aggregate(cell, i, measured[i], repetitions, warmup))
        except Exception as exc:  # one bad metric must not lose the other cases (or the run)
            failures[i] = _failure_record(cell, i, _fail("aggregate", _describe(exc)), "aggregate")
    return CellOutcome(results=results, failures=[failures[i] for i in sorted(failures)])


def _run_case(
    cell: Cell, i: int, rep: int, between: Callable[[], None], timeout: float, *, warmup: bool
) -> dict[str, Any]:
    """Flush, then run case ``i`` once in a fresh process."""
    try:
        between()
    except Exception as exc:  # the server went away: fail the case, loudly
        return _fail("flush", _describe(exc))
    case = cell.cases[i] if not warmup else warmup_case(cell.cases[i])
    began = time.monotonic()
    [outcome] = run_repetition(cell.scenario, cell.target, [case], timeout, rep)
    return {**outcome, "wall_s": time.monotonic() - began}


def warmup_case(case: dict[str, Any]) -> dict[str, Any]:
    """The case as a warm-up repetition runs it: time-bound sizes scaled by WARMUP_SCALE."""
    return {k: v * WARMUP_SCALE if k in SCALED_KEYS else v for k, v in case.items()}


def cell_failure(cell: Cell, kind: str, exc: BaseException) -> dict[str, Any]:
    """A failure entry for a whole cell (every case of it)."""
    t = cell.target
    return {"scenario": cell.scenario, "server": t.server, "config": t.config,
            "protocol": t.protocol, "parser": t.parser, "kind": kind, "error": _describe(exc)}


def _describe(exc: BaseException) -> str:
    """``Type: message`` of an exception."""
    return f"{type(exc).__name__}: {exc}"


def _failure_record(cell: Cell, i: int, outcome: dict[str, Any], when: str) -> dict[str, Any]:
    """The failure entry written to the result file (no figures)."""
    t = cell.target
    return {
        "scenario": cell.scenario, "server": t.server, "config": t.config,
        "protocol": t.protocol, "parser": t.parser, "params": cell.cases[i],
        "kind": outcome["kind"], "error": f"{when}: {outcome['error']}",
    }


def aggregate(
    cell: Cell, i: int, outcomes: list[dict[str, Any]], repetitions: int, warmup: int
) -> dict[str, Any]:
    """Combine per-repetition outcomes of case ``i`` into one result record.

    A metric some repetitions did not report (a server that omits a statistic now and
    then) is summarised over the repetitions that did; its ``count`` says how many.
    """
    t = cell.target
    names = list(dict.fromkeys(name for o in outcomes for name in o["metrics"]))
    metrics = {}
    for name in names:
        reported = [o["metrics"][name] for o in outcomes if name in o["metrics"]]
        metrics[name] = summarize([value for value, _unit in reported], reported[0][1])
    return {
        "scenario": cell.scenario, "server": t.server, "config": t.config,
        "protocol": t.protocol, "parser": t.parser, "params": cell.cases[i],
        "method": {"repetitions": repetitions, "warmup": warmup,
                   "seconds": round(sum(o.get("wall_s", 0.0) for o in outcomes), 2)},
        "metrics": metrics,
        "exactly_once": outcomes[0].get("exactly_once"),
        "extra": dict(outcomes[0].get("extra") or {}),
    }
