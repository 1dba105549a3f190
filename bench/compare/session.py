"""Interleaved runs: each side's suite (``python -m bench`` of that revision) against shared servers.

The servers are started once, fresh, by this process; every run of every side uses them, so the
two revisions meet the same server processes. Each round runs base, head and (for the A/A noise
floor) base again, in an order rotated from round to round so that no side always goes first.
Each run is one independent ``python -m bench`` process with one repetition and no warm-up.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.compare import CompareError
from bench.compare.build import Env
from bench.results import ResultsError, load_file, write_results
from bench.servers import ServerStartError, ServerUnavailable, start_server

SIDES = ("base", "head", "aa")


@dataclass
class SessionPlan:
    """What every run measures, and how many rounds."""

    scenarios: list[str]
    servers: list[str]
    runs: int
    quick: bool = False
    params: list[str] = field(default_factory=list)
    timeout: float = 900.0
    aa: bool = True


def round_order(index: int, sides: Sequence[str]) -> list[str]:
    """Sides in run order for round ``index``: rotated so each side takes each position in turn."""
    shift = index % len(sides)
    return [*sides[shift:], *sides[:shift]]


def bench_command(env: Env, plan: SessionPlan, urls: dict[str, str], output: Path) -> list[str]:
    """One run of the revision's own suite: one repetition per case, no warm-up, these servers."""
    command = [str(env.python), "-m", "bench", "--scenarios", ",".join(plan.scenarios),
               "--protocols", "3", "--parsers", "hiredis", "--repetitions", "1", "--warmup", "0",
               "--force-flush", "--timeout", str(plan.timeout), "--output", str(output)]
    for name, url in urls.items():
        command += ["--server-url", f"{name}={url}"]
    for item in plan.params:
        command += ["--param", item]
    return command + (["--quick"] if plan.quick else [])


def _run_once(env: Env, command: list[str], log: Path, output: Path, what: str) -> dict[str, Any]:
    """Run one suite process; its result document, or CompareError naming the run and its log."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, cwd=env.source, stdout=out, stderr=subprocess.STDOUT,
                              env=clean, check=False)
    if done.returncode != 0 or not output.exists():
        tail = [line for line in log.read_text().splitlines() if line.strip()][-1:] or ["?"]
        raise CompareError(f"{what} failed (exit {done.returncode}): {tail[0].strip()[:200]} "
                           f"(log: {log})")
    try:
        doc = load_file(output)
    except ResultsError as exc:
        raise CompareError(f"{what}: {str(exc).splitlines()[0]}") from exc
    # Record what ran: the exported tree has no .git, so the suite could not see the commit; and
    # the servers, external to the suite, were started in their default configuration. The file is
    # rewritten so that a report rendered from the kept files says the same.
    doc["git"] = {"commit": env.revision.commit, "dirty": False}
    for row in doc["results"]:
        row["config"] = "default" if row["config"] == "external" else row["config"]
    write_results(doc, output)
    return doc


def run_session(
    envs: dict[str, Env], plan: SessionPlan, workdir: Path, progress: Callable[[str], None]
) -> dict[str, list[dict[str, Any]]]:
    """Start the servers, run every round, and return each side's result documents."""
    sides = [s for s in SIDES if s != "aa" or plan.aa]
    docs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    with contextlib.ExitStack() as stack:
        try:
            urls = {k: stack.enter_context(start_server(k, "default")).url for k in plan.servers}
        except (ServerUnavailable, ServerStartError) as exc:
            raise CompareError(f"cannot start a server: {getattr(exc, 'reason', exc)}") from exc
        for index in range(plan.runs):
            for side in round_order(index, sides):
                env = envs["base" if side == "aa" else side]
                output = workdir / side / f"run-{index + 1}.json"
                what = f"{side} run {index + 1}/{plan.runs} ({env.revision.label})"
                progress(what)
                began = time.monotonic()
                command = bench_command(env, plan, urls, output)
                docs[side].append(_run_once(env, command, workdir / f"{side}.log", output, what))
                progress(f"{what}: {time.monotonic() - began:.0f} s")
    return docs
