"""The report layer: benchmark result files -> Markdown, tables and charts for the docs site.

Pure data code on pandas and plotly, no mkdocs: ``docs/macros.py`` registers every entry of
:data:`SECTIONS` as a macro. Modules:

- :mod:`.load`: result files -> tidy frames (``Dataset``), duplicate-run and method checks;
- :mod:`.compare`: selection, like-for-like ratios with whiskers, noise;
- :mod:`.text`: numbers, units, Markdown tables, source lines;
- :mod:`.figures`: plotly figures as data-only ``<div>`` (drawn by docs/assets/charts.js);
- one module per page (``home``, ``performance``, ...), each exporting ``SECTIONS``.

To add a page: write ``bench/report/<page>.py`` with functions ``(ds, prefix) -> str`` and a
``SECTIONS`` dict, and list the module in ``PAGES`` below.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from bench.report.load import Dataset, ReportError, load, result_paths

Section = Callable[[Dataset, str], str]
PAGES = ("common", "home", "performance", "workload", "takeaways", "servers", "tuning",
         "connections", "methodology", "history", "ha", "peers", "peers_goals", "production", "runtimes")


def _sections() -> dict[str, Section]:
    found: dict[str, Section] = {}
    for page in PAGES:
        module = import_module(f"bench.report.{page}")
        clash = set(found) & set(module.SECTIONS)
        if clash:
            raise ReportError(f"bench/report/{page}.py: macros {sorted(clash)} defined twice")
        found.update(module.SECTIONS)
    return found


SECTIONS = _sections()

__all__ = ["PAGES", "SECTIONS", "Dataset", "ReportError", "Section", "load", "result_paths"]
