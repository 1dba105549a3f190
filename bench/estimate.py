"""A rough duration estimate of a plan on a quiet machine (printed by ``--list``).

Each case costs its time-bound sizes (exact) plus a per-scenario set-up cost (process start,
filling, verification), taken from runs on an idle 2-core machine. On a loaded machine the
set-up costs grow; the time-bound part does not.
"""

from __future__ import annotations

from typing import Any

from bench.harness import warmup_case
from bench.plan import Plan

SERVER_START_S = 0.6
SETUP_S = {"reference": 0.3, "enqueue-single": 0.3, "enqueue-bulk": 0.6, "process": 1.0,
           "lifecycle": 0.3, "latency": 0.8, "maintenance": 0.7, "memory": 1.5,
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
    elif scenario == "latency":
        timed = (case["duration_s"] + FILL_LATENCY_S if "duration_s" in case
                 else case["jobs"] * ONE_JOB_S)
    else:
        timed = case.get("min_seconds", 0.0)
    return SETUP_S.get(scenario, 0.5) + timed


def plan_seconds(plan: Plan) -> float:
    """Estimated wall seconds of the whole plan."""
    total = 0.0
    for server in plan.servers:
        total += SERVER_START_S * len(server.configs)
        for cell in (c for cfg in server.configs for c in cfg.cells):
            if cell.warmup and cell.cases:
                total += cell.warmup * case_seconds(cell.scenario, warmup_case(cell.cases[0]))
            total += cell.repetitions * sum(case_seconds(cell.scenario, c) for c in cell.cases)
    return total

