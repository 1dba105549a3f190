"""Regression evidence: compare two Conveyor revisions (or two result files) benchmark by benchmark.

``python -m bench.compare BASE HEAD`` (``nox -s compare -- BASE HEAD``). Modules:
:mod:`~bench.compare.verdict` (pure statistics and verdicts), :mod:`~bench.compare.samples`
(result files to per-metric samples), :mod:`~bench.compare.render` (Markdown and JSON),
:mod:`~bench.compare.build` (a revision in its own worktree and venv),
:mod:`~bench.compare.session` (interleaved runs on shared fresh servers), :mod:`~bench.compare.cli`.
"""

from __future__ import annotations


class CompareError(Exception):
    """Bad input or a failed step; its message is one line, shown without a traceback."""
