"""A rough duration estimate of a plan on a quiet machine (printed by ``--list``).

A cell that a committed result file timed (``method.cell_seconds``, the newest full or quick run
like the plan) costs what it took there, scaled to the planned repetitions: the model below
guessed 29 min for a run whose cells took 42 (scale-out builds Cluster and replicated topologies,
connections opens hundreds of clients). Other cells cost the model: each case its time-bound
sizes (exact) plus a per-scenario set-up cost (process start, filling, verification), taken from
runs on an idle 2-core machine. On a loaded machine the set-up costs grow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness import warmup_case
from bench.plan import CellSpec, Plan
from bench.results import RESULTS_DIR, ResultsError, load_results

SERVER_START_S = 0.6
SETUP_S = {"reference": 0.3, "enqueue-single": 0.3, "enqueue-bulk": 0.6, "process": 1.0,
           "lifecycle": 0.3, "latency": 0.8, "maintenance": 0.7, "listing": 3.0, "memory": 1.5,
           "connections": 0.5}
FILL_LATENCY_S = 3.0  # open-loop latency: capacity drain, producer start-up, backlog drain
ONE_JOB_S = 0.0006  # one unloaded round trip through queue and worker


def case_seconds(scenario: str, case: dict[str, Any]) -> float:
    """Estimated wall seconds of one run of ``case``."""
    timed = 0.0
    if scenario == "reference":
        timed = 6 * case["seconds"]
    elif scenario == "process":
        timed = case["min_seconds"] * 1.4  # the drain, filling it, a rare resized rerun
    elif scenario == "enqueue-single" and case.get("callers", 1) == 1:
        timed = 2 * case["min_seconds"]  # bracketed by as long of bare PINGs
    elif scenario == "latency":
        timed = (case["duration_s"] + FILL_LATENCY_S if "duration_s" in case
                 else case["jobs"] * ONE_JOB_S)
    else:
        timed = case.get("min_seconds", 0.0)
    return SETUP_S.get(scenario, 0.5) + timed


def _model_seconds(cell: CellSpec, repetitions: int, warmup: int) -> float:
    total = repetitions * sum(case_seconds(cell.scenario, c) for c in cell.cases)
    if warmup and cell.cases:
        total += warmup * case_seconds(cell.scenario, warmup_case(cell.cases[0]))
    return total


def recorded_cells(quick: bool, results: Path = RESULTS_DIR) -> dict[str, tuple[float, int, int]]:
    """Cell label -> (seconds, repetitions, warm-up runs) from the newest complete run that timed
    it with the same ``quick`` setting."""
    found: dict[str, tuple[str, float, int, int]] = {}
    try:
        docs = load_results(results) if results.exists() else []
    except ResultsError:  # a broken file stops the site build, not an estimate: the model prices
        docs = []
    for doc in docs:
        method = doc.get("method", {})
        if bool(method.get("quick")) != quick or not method.get("complete", True):
            continue
        when = doc.get("created_utc", "")
        for label, seconds in (method.get("cell_seconds") or {}).items():
            if label not in found or when > found[label][0]:
                found[label] = (when, float(seconds), int(method.get("repetitions", 1)),
                                int(method.get("warmup", 0)))
    return {label: (seconds, reps, warmup) for label, (_, seconds, reps, warmup) in found.items()}


def plan_estimate(plan: Plan, recorded: dict[str, tuple[float, int, int]]) -> tuple[float, int]:
    """(estimated wall seconds of the whole plan, how many of its cells a recorded time priced)."""
    total, priced = 0.0, 0
    for server in plan.servers:
        total += SERVER_START_S * len(server.configs)
        for cell in (c for cfg in server.configs for c in cfg.cells):
            model = _model_seconds(cell, cell.repetitions, cell.warmup)
            if cell.label in recorded and cell.cases:
                seconds, reps, warmup = recorded[cell.label]
                # the recorded time scaled by what the planned repetitions add, in the model's terms
                total += seconds * model / _model_seconds(cell, reps, warmup)  # > 0: set-up costs
                priced += 1
            else:
                total += model
    return total, priced

