"""Benchmark scenarios: one module per scenario; each module's ``NAME`` is the scenario name.

A scenario module provides:

- ``NAME``: the scenario name used in result files and on the command line;
- ``DEFAULTS`` and ``QUICK``: size options (overridable with ``--param NAME.key=value``);
- ``cases(variant, options) -> list[dict]``: the parameter sets to measure on a variant
  (server x configuration x protocol x parser); an empty list skips the variant;
- ``run(target, params) -> dict``: one repetition of one case, run in a fresh process;
  returns ``{"metrics": {name: [value, unit]}, "exactly_once": report | None, "extra": {...}}``.
- ``NEEDS_CONVEYOR``: whether it imports the library.

Scenarios in ``OPT_IN`` run only when named in ``--scenarios`` (slow topologies, not part of the
default matrix or of CI's quick run).
"""

from __future__ import annotations

import importlib
from types import ModuleType

ORDER = (
    "reference",
    "enqueue-single",
    "enqueue-bulk",
    "process",
    "lifecycle",
    "latency",
    "maintenance",
    "listing",
    "memory",
    "connections",
    "scale-out",
    "tls",
    "failover",
)
OPT_IN = ("failover",)
DEFAULT = tuple(name for name in ORDER if name not in OPT_IN)


def module_name(name: str) -> str:
    """Python module for scenario ``name`` (dashes become underscores)."""
    if name not in ORDER:
        raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(ORDER)}")
    return f"bench.scenarios.{name.replace('-', '_')}"


def load(name: str) -> ModuleType:
    """Import scenario module ``name`` and check its NAME constant."""
    module = importlib.import_module(module_name(name))
    if name != module.NAME:
        raise RuntimeError(f"{module.__name__}.NAME is {module.NAME!r}, expected {name!r}")
    return module
