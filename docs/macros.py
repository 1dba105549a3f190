"""mkdocs-macros module: thin wrappers around :mod:`bench.report`.

Every macro returns Markdown built from the result files under ``extra.results_dir``
(``results/`` unless ``CONVEYOR_RESULTS_DIR`` says otherwise). All logic lives in
the bench/report/ package, which is unit-tested without mkdocs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mkdocs.exceptions import PluginError  # noqa: E402

from bench import report  # noqa: E402
from bench.results import ResultsError  # noqa: E402  (ReportError is one)


def _results_root(env: Any) -> Path:
    """The results directory, relative to mkdocs.yml."""
    base = Path(env.conf["config_file_path"]).resolve().parent
    return (base / str(env.conf["extra"]["results_dir"])).resolve()


def _link_prefix(env: Any) -> str:
    """Relative prefix from the current page's source file to the docs root."""
    depth = len(Path(env.page.file.src_uri).parts) - 1
    return "../" * depth


def define_env(env: Any) -> None:
    """Load the results once and register one macro per report section."""
    try:
        dataset = report.load(_results_root(env))
    except ResultsError as exc:  # the message names the file; show it without a traceback
        raise PluginError(f"bad result file: {exc}") from exc

    def bind(section: Callable[[report.Dataset, str], str]) -> Callable[[], str]:
        def macro() -> str:
            return section(dataset, _link_prefix(env))

        return macro

    for name, section in report.SECTIONS.items():
        env.macro(bind(section), name)

    env.variables["results_empty"] = dataset.empty
