"""Numbers, units and Markdown: how figures are written on the site.

A spread is written at the precision of its median (``6,854 ± 50 jobs/s``), or as a share of it
when it would round to zero (``163 ± 0.04% B/job``). Units are written as people write them:
jobs/s, ms, B/job.
"""

from __future__ import annotations

import html
import math
import re
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

MISSING = "\N{EM DASH}"
BENCH_COMMAND = "nox -s bench"
REPO = Path(__file__).resolve().parents[2]
UNITS = {"lifecycles_per_s": "lifecycles/s", "items_per_s": "jobs/s", "jobs_per_s": "jobs/s",
         "batches_per_s": "batches/s", "ops_per_s": "calls/s", "offered_per_s": "jobs/s",
         "bytes_per_job": "B/job", "bytes_per_connection": "B/connection"}
LABELS = {"jobs": "throughput", "lifecycles": "throughput", "capacity_jobs": "capacity", "items": "promoted",
          "job": "memory"}
SI_UNITS = {"1/s": "/s", "ms": "ms", "s": "s", "B": "B", "count": "", "connections": ""}
WORDS = {"payload_bytes": "payload {} B", "producers": "{} producers", "concurrency": "concurrency {}",
         "batch": "batch {}", "pool_size": "pool {}"}


def decimals(value: float) -> int:
    """Decimal places giving about three significant digits (none from 100 up)."""
    magnitude = abs(value)
    return 0 if magnitude >= 100 or magnitude == 0 else min(6, 2 - math.floor(math.log10(magnitude)))


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: float | None, places: int | None = None) -> str:
    """A number with thousands separators and about three significant digits."""
    if missing(value):
        return MISSING
    places = (0 if float(value).is_integer() else decimals(value)) if places is None else places  # type: ignore[arg-type]
    return f"{value:,.{places}f}"


RANGE_UP_TO = 5  # repetitions up to which the spread shown is the range (see fmt_stat)
STAT_HEADER = "median and spread"


def fmt_stat(median: float | None, mad: float | None = 0.0, n: int = 1,
             lo: float | None = None, hi: float | None = None) -> str:
    """The median and its spread at the median's precision: ``median (min to max)`` for up to
    RANGE_UP_TO repetitions (the MAD of three values is the nearer one's distance and hides the
    other), else ``median ± MAD`` (as a % when that rounds to 0)."""
    if missing(median):
        return MISSING
    ranged = 2 <= n <= RANGE_UP_TO and not missing(lo) and not missing(hi) and lo != hi
    # whole numbers (counts: connections, jobs) stay whole: "4 (4 to 5)", never "4.00 (4.00 to 5.00)"
    whole = all(float(v).is_integer() for v in (median, mad or 0, *((lo, hi) if ranged else ())))  # type: ignore[arg-type]
    places = 0 if whole else decimals(median)  # type: ignore[arg-type]
    if ranged:
        return f"{fmt(median, places)} ({span(lo, hi, lambda v: fmt(v, places))})"
    if n < 2 or not mad:
        return fmt(median, places)
    spread = f"{mad:,.{places}f}"
    if float(spread.replace(",", "")) == 0 and median:
        share = mad / abs(median) * 100
        spread = f"{share:.1g}%" if share >= 0.01 else "<0.01%"
    return f"{fmt(median, places)} ± {spread}"


def unit_of(metric: str, unit: str = "") -> str:
    """The unit people write for ``metric`` (``jobs/s``, ``ms``, ``B/job``)."""
    return next((text for suffix, text in UNITS.items() if metric.endswith(suffix)), SI_UNITS.get(unit, unit))


def metric_label(metric: str, unit: str = "") -> str:
    """Column header: ``p99.9 (ms)``, ``throughput (jobs/s)``."""
    label = "job" if metric == "bytes_per_job" else re.sub(r"^p(\d+)_(\d+)", r"p\1.\2", metric)
    for suffix in ("_per_s", "_ms", "_bytes", "_s", "bytes_per_"):
        label = label.removesuffix(suffix)
    label, shown = LABELS.get(label, label).replace("_", " "), unit_of(metric, unit)
    return f"{label} ({shown})" if shown else label


def pct(share: float) -> str:
    """0.873 -> '87%'."""
    return f"{share * 100:.0f}%"


def times(ratio: float) -> str:
    """1.234 -> '1.23x'."""
    return f"{ratio:.2f}x"


def span(lo: float, hi: float, show: Callable[[float], str] = lambda v: f"{v:.2f}") -> str:
    """A range ``0.98 to 1.10``, written with an en dash."""
    return f"{show(lo)}\N{EN DASH}{show(hi)}"


def cell(value: Any) -> str:
    """A table cell: pipes escaped, no newline."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(frame: pd.DataFrame) -> str:
    """A Markdown pipe table of ``frame`` (its columns are the headers)."""
    shown = frame.copy()
    shown.columns = [cell(c) for c in shown.columns]
    return shown.map(cell).to_markdown(index=False, disable_numparse=True)


def wrapped(code: str) -> str:
    """A code block of generated text (its long lines wrap on screen, see charts.css)."""
    return f'<pre class="cv-wrap"><code>{html.escape(code)}</code></pre>\n'


def admonition(kind: str, title: str, body: str, marker: str = "!!!") -> str:
    """A Material admonition (``marker="???"``: collapsible) with ``body`` indented."""
    indented = "\n".join(("    " + line) if line else "" for line in body.splitlines())
    return f'{marker} {kind} "{title}"\n\n{indented}\n'


def no_data(what: str) -> str:
    """The note shown where nothing has been measured yet."""
    return admonition("info", "No results yet", f"No result file under `results/` contains {what} yet. "
                      f"Make one with `{BENCH_COMMAND}` (see [Methodology & reproduce](methodology.md)), "
                      "then rebuild the site.")


@cache
def commit_note(commit: str) -> str:
    """``at commit abc1234``, noting when the library or the benchmark has changed since."""
    if not commit:
        return "at an unknown commit"
    try:
        out = subprocess.run(["git", "rev-list", "--count", f"{commit}..HEAD", "--", "queue",
                              "bench/scenarios", "bench/harness.py", "bench/runner.py"],
                             cwd=REPO, capture_output=True, text=True, check=True, timeout=20)
        moved = int(out.stdout.strip() or 0)
    except (OSError, subprocess.SubprocessError):
        return f"at commit `{commit[:7]}` (not in this checkout's history)"
    commits = "1 commit" if moved == 1 else f"{moved} commits"
    return f"at commit `{commit[:7]}`" + (f" (the library or benchmark changed in {commits} since)"
                                          if moved else "")


def source_line(run: pd.Series, prefix: str = "") -> str:
    """``Source: run <id> (<date>, <machine>) at commit ... · raw JSON``; flags quick and incomplete runs."""
    flags = " · **quick run** (one repetition, indicative only)" if run.quick else ""
    if run.doc["method"].get("complete") is False:
        flags += " · **incomplete run** (stopped before every planned case ran)"
    return (f"<small>Source: run `{run.run_id}` ({run.created}, {run.machine}, {run.cpu}, {run.cores} "
            f"cores), {commit_note(run.commit)}{flags} · [raw JSON]({prefix}{run.url})</small>")


def params_text(params: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """``payload 64 B, concurrency 8`` in plain words."""
    return ", ".join(WORDS.get(k, k.replace("_", " ") + " {}").format(v)
                     for k, v in params.items() if k not in skip and not isinstance(v, list))
