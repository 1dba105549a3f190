"""Numbers, units and Markdown: how figures are written on the site.

Measured figures are written to three significant digits (``276,000 jobs/s``, ``12.3 ms``), the
precision a spread of a few percent allows; whole counts stay whole and exact (``12,346 jobs``).
A spread is written at the precision of its median (``6,850 ± 50 jobs/s``), or as a share of it
when it would round to nothing (``163 ± 0.04% B/job``). Ratios keep two decimals below 10
(``1.13x``) and three significant digits from 10 up (``133x``). Units are written as people write
them: jobs/s, ms, B/job.
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
          "job": "memory", "evalsha_c1_ops": "EVALSHA, one at a time"}
SI_UNITS = {"1/s": "/s", "ms": "ms", "s": "s", "B": "B", "count": "", "connections": ""}
WORDS = {"payload_bytes": "payload {} B", "producers": "{} producers", "concurrency": "concurrency {}",
         "batch": "batch {}", "pool_size": "pool {}"}


def decimals(value: float) -> int:
    """Decimal places giving three significant digits: none from 100 to 999, negative from 1,000
    up (-3 rounds 276,345 to 276,000)."""
    magnitude = abs(value)
    if magnitude == 0:
        return 0
    places = 2 - math.floor(math.log10(magnitude))
    if abs(round(value, places)) >= 10 ** (3 - places):  # 99.96 rounds up to 100, not 100.0
        places -= 1
    return min(6, places)


def rounded(value: float, places: int) -> str:
    """``value`` with thousands separators at ``places`` decimals; negative ``places`` round to
    tens, hundreds, thousands (``rounded(276345.2, -3)`` is ``276,000``)."""
    if places >= 0:
        return f"{value:,.{places}f}"
    return f"{round(value, places) + 0.0:,.0f}"  # + 0.0: no "-0"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: float | None, places: int | None = None) -> str:
    """A number with thousands separators and three significant digits (``276,000``, ``12.3``);
    a whole number (a count) is written whole and exact (``12,346``)."""
    if missing(value):
        return MISSING
    places = (0 if float(value).is_integer() else decimals(value)) if places is None else places  # type: ignore[arg-type]
    return rounded(value, places)  # type: ignore[arg-type]


RANGE_UP_TO = 5  # repetitions up to which the spread shown is the range (see fmt_stat)
STAT_HEADER = "median and spread"


def fmt_stat(median: float | None, mad: float | None = 0.0, n: int = 1,
             lo: float | None = None, hi: float | None = None) -> str:
    """The median and its spread at the median's precision: ``median (min to max)`` for up to
    RANGE_UP_TO repetitions (the MAD of three values is the nearer one's distance and hides the
    other), else ``median ± MAD``; a spread that rounds to nothing is written as a share of the
    median (``1,160 (range 0.03%)``, ``163 ± 0.04%``), and repetitions that all measured the same
    figure say so (``436 (all 3 equal)``): a bare median would read as a spread not shown."""
    if missing(median):
        return MISSING
    ranged = 2 <= n <= RANGE_UP_TO and not missing(lo) and not missing(hi) and lo != hi
    # whole numbers (counts: connections, jobs) stay whole: "4 (4 to 5)", never "4.00 (4.00 to 5.00)"
    whole = all(float(v).is_integer() for v in (median, mad or 0, *((lo, hi) if ranged else ())))  # type: ignore[arg-type]
    places = 0 if whole else decimals(median)  # type: ignore[arg-type]
    shown = fmt(median, places)
    if n >= 2 and not whole and not missing(lo) and lo == hi:  # a count the same every time stays bare
        return f"{shown} (all {n} equal)"
    if ranged:
        if fmt(lo, places) == fmt(hi, places) == shown:  # both ends round to the median
            return f"{shown} (range {share(hi - lo, median)})"  # type: ignore[operator, arg-type]
        return f"{shown} ({span(lo, hi, lambda v: fmt(v, places))})"  # type: ignore[arg-type]
    if n < 2 or not mad:
        return shown
    spread = rounded(mad, places)
    if float(spread.replace(",", "")) == 0 and median:
        spread = share(mad, median)
    return f"{shown} ± {spread}"


def share(spread: float, median: float) -> str:
    """A spread as a share of its median, one significant digit: ``0.04%`` (``<0.01%`` below)."""
    percent = abs(spread / median) * 100
    return f"{percent:.1g}%" if percent >= 0.01 else "<0.01%"


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


def ratio_digits(ratio: float) -> str:
    """A ratio's digits: two decimals below 10 (``1.13``), three significant digits from 10 up
    (``15.0``, ``133``, ``1,230``): a ratio of two figures known to a few percent has no more."""
    return MISSING if missing(ratio) else rounded(ratio, _ratio_places(ratio))


def _ratio_places(ratio: float) -> int:
    return 2 if abs(round(ratio, 2)) < 10 else decimals(ratio)  # 9.996: 10.0


def times(ratio: float) -> str:
    """1.234 -> '1.23x', 132.56 -> '133x'."""
    return MISSING if missing(ratio) else f"{ratio_digits(ratio)}x"


def times_beside(ratio: float, bound: float) -> str:
    """A ratio shown beside the bound it is judged against: as ``times``, with one more digit
    where that would round it onto the bound (0.966x shown as 0.97x beside "at least 0.97x", or
    14.96x as 15.0x beside 15.0x, reads as met while the verdict says not)."""
    shown = times(ratio)
    if shown != times(bound) or ratio == bound:
        return shown
    return f"{rounded(ratio, _ratio_places(ratio) + 1)}x"


def span(lo: float, hi: float, show: Callable[[float], str] = ratio_digits) -> str:
    """A range ``0.98 to 1.10`` (of ratios, unless ``show`` says otherwise), with an en dash."""
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


# What a measurement depends on: the library, and the code of the suite that drives, times and
# aggregates it (scenarios, the peers' adapters, the servers and topologies it starts), not the
# report or the tests.
MEASURED_PATHS = ("queue", "bench/scenarios", "bench/harness.py", "bench/runner.py", "bench/worker.py",
                  "bench/stats.py", "bench/servers", "bench/peers", "bench/topologies.py",
                  "bench/failover.py", "bench/tls.py")


def measured(path: str) -> bool:
    """Whether a repository path is one of the MEASURED_PATHS (or inside one)."""
    return any(path == root or path.startswith(root + "/") for root in MEASURED_PATHS)


@cache
def commit_note(commit: str) -> str:
    """``at commit abc1234``, noting when the library or the benchmark has changed since."""
    if not commit:
        return "at an unknown commit"
    try:
        out = subprocess.run(["git", "rev-list", "--count", f"{commit}..HEAD", "--", *MEASURED_PATHS],
                             cwd=REPO, capture_output=True, text=True, check=True, timeout=20)
        moved = int(out.stdout.strip() or 0)
    except (OSError, subprocess.SubprocessError):
        return f"at commit `{commit[:7]}` (not in this checkout's history)"
    commits = "1 commit" if moved == 1 else f"{moved} commits"
    return f"at commit `{commit[:7]}`" + (f" (the library or benchmark changed in {commits} since)"
                                          if moved else "")


def uncommitted_kind(git: dict[str, Any]) -> tuple[str, list[str]]:
    """What a run's uncommitted changes touched: ('clean' | 'unrecorded' | 'other' | 'measured',
    the measured paths changed)."""
    if not git.get("dirty"):
        return "clean", []
    changed = git.get("changed")
    if changed is None:
        return "unrecorded", []
    inside = [path for path in changed if measured(path)]
    return ("measured" if inside else "other"), inside


# The runs table's short form of each kind (the source line says it in full).
DIRTY_WORDS = {"clean": "", "unrecorded": " dirty (files not recorded)",
               "other": " dirty (not the library or benchmark)",
               "measured": " **dirty (library or benchmark)**"}


def uncommitted_note(git: dict[str, Any]) -> str:
    """What a run's uncommitted changes touched ('' for a clean tree): the library or benchmark
    (its figures may not match the commit), only other files, or files not recorded (older runs)."""
    kind, inside = uncommitted_kind(git)
    if kind == "clean":
        return ""
    if kind == "unrecorded":
        return " · **uncommitted changes** (the files were not recorded)"
    if kind == "other":
        return " · uncommitted changes outside the library and benchmark only"
    shown = ", ".join(f"`{path}`" for path in inside[:3])
    if len(inside) > 3:
        shown += f" and {len(inside) - 3} more"
    return (f" · **uncommitted changes to the library or benchmark** ({shown}): "
            "the commit alone may not reproduce it")


def source_line(run: pd.Series, prefix: str = "") -> str:
    """``Source: run <id> (<date>, <machine>) at commit ... · raw JSON``; flags quick, incomplete
    and uncommitted runs."""
    flags = " · **quick run** (one repetition, indicative only)" if run.quick else ""
    if run.doc["method"].get("complete") is False:
        flags += " · **incomplete run** (stopped before every planned case ran)"
    flags += uncommitted_note(run.doc.get("git") or {})
    return (f"<small>Source: run `{run.run_id}` ({run.created}, {run.machine}, {run.cpu}, {run.cores} "
            f"cores), {commit_note(run.commit)}{flags} · [raw JSON]({prefix}{run.url})</small>")


def params_text(params: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """``payload 64 B, concurrency 8`` in plain words."""
    return ", ".join(WORDS.get(k, k.replace("_", " ") + " {}").format(v)
                     for k, v in params.items() if k not in skip and not isinstance(v, list))
