"""Headline rows: the stated, like-for-like condition each scenario's headline figure comes from.

The report must not pick the best row of a grid. Each scenario module may declare
``HEADLINE_CASE = {"metric": ..., "params": {...}, "conditions": "..."}``; the row of the
baseline variant (default configuration, RESP3, hiredis) whose params contain ``params`` is
marked with ``headline`` in the result file, and ``method.headlines`` lists every declaration.
Rows of other variants with the same params are the like-for-like comparisons.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench import scenarios


def declarations(names: list[str]) -> dict[str, dict[str, Any]]:
    """``{scenario: HEADLINE_CASE}`` for the scenarios that declare one."""
    out = {}
    for name in names:
        case = getattr(scenarios.load(name), "HEADLINE_CASE", None)
        if case:
            out[name] = dict(case)
    return out


def mark(row: dict[str, Any], primary: bool) -> None:
    """Add ``headline`` to ``row`` when it is its scenario's stated headline condition."""
    case = getattr(scenarios.load(row["scenario"]), "HEADLINE_CASE", None)
    if not (primary and case and case["metric"] in row["metrics"]):
        return
    if all(row["params"].get(k) == v for k, v in case["params"].items()):
        row["headline"] = {"metric": case["metric"], "conditions": case["conditions"]}


def library_defaults() -> dict[str, Any]:
    """The library's default settings that sizing advice depends on (JSON scalars only)."""
    from conveyor import QueueSettings  # noqa: PLC0415 (deliberately lazy)
    from conveyor._dispatch import WorkerOptions  # noqa: PLC0415 (deliberately lazy)

    out: dict[str, Any] = {}
    for obj, prefix in ((QueueSettings(), "queue"), (WorkerOptions(), "worker")):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None or isinstance(value, bool | int | float | str):
                out[f"{prefix}.{f.name}"] = value
    return out
