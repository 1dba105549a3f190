"""Transitional: sections of the old report module not yet ported to the package."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from bench.report import _legacy
from bench.report.load import Dataset


@cache
def _old(root: Path) -> _legacy.Dataset:
    return _legacy.load(root)


def _wrap(fn):  # type: ignore[no-untyped-def]
    return lambda ds, prefix="": fn(_old(ds.root), prefix)


SECTIONS = {name: _wrap(fn) for name, fn in _legacy.SECTIONS.items()}
__all__ = ["SECTIONS", "Dataset"]
