"""The report layer: result files -> Markdown, tables and charts for the docs site.

Pure data code on pandas and plotly, no mkdocs: ``docs/macros.py`` registers every entry of
:data:`SECTIONS` as a macro. Shared modules: ``load`` (tidy frames), ``compare`` (like-for-like
ratios, noise), ``text`` (numbers, Markdown), ``figures`` (plotly), ``common``; then one module per
page, each with functions ``(ds, prefix) -> str`` in a ``SECTIONS`` dict and listed in ``PAGES``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from bench.report.load import Dataset, ReportError, load, result_paths

Section = Callable[[Dataset, str], str]
PAGES = ("common", "home", "performance", "workload", "servers", "tuning",
         "connections", "methodology", "history", "ha", "peers", "peers_goals", "production", "runtimes",
         "batching", "processes")


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
