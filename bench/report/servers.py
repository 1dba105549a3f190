"""Servers page: every server as a ratio to Valkey 9.1 of the same run, with whiskers.

Ratios are oriented so that above 1 is better (for latency and memory, the reference divided by
the server). Dragonfly is shown only against the Valkey 9.1 of its own run.
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd

from bench.report.common import (
    DRAGONFLY,
    REFERENCE_SERVER,
    machine,
    primary_run,
    server_rank,
    servers,
    source,
)
from bench.report.compare import ratio_text, same_method_runs, select, versus
from bench.report.figures import chart, ratio_bars
from bench.report.load import Dataset, same_method
from bench.report.points import COMPARED, NOT_MEASURED
from bench.report.text import MISSING, admonition, fmt, md_table, no_data, params_text, times

RATIO = ["point", "ratio", "lo", "hi", "noise", "overlap"]


def comparisons(ds: Dataset, run: str, server: str, config: str = "default") -> pd.DataFrame:
    """``server``/``config`` against Valkey 9.1 (default) of ``run``: one row per point."""
    same_method(ds, [run], f"servers comparison in run {run}")
    out, measured = [], select(ds.summary, run_id=run, protocol=3, parser="hiredis")
    for point in COMPARED:
        rows = point.rows(measured)
        ref = select(rows, server=REFERENCE_SERVER, config="default")
        found = versus(select(rows, server=server, config=config), ref, "case",
                       lower_better=not point.higher_better)
        out += [found.iloc[:1].assign(point=point.label)[RATIO]]
    return pd.concat(out, ignore_index=True)


def cell(found: pd.DataFrame, point: str) -> str:
    """``1.21x (1.15 to 1.30)`` or ``0.98x (0.90 to 1.05), noise`` (written with an en dash)."""
    row = found[found.point == point]
    return NOT_MEASURED if row.empty else ratio_text(row.iloc[0])


def ratio_table(columns: dict[str, pd.DataFrame], points: list[str]) -> str:
    """One row per comparison point, one column of ratio cells per server or mode."""
    return md_table(pd.DataFrame({"comparison": points,
                                  **{s: [cell(f, p) for p in points] for s, f in columns.items()}}))


def recommendation(columns: dict[str, pd.DataFrame]) -> str:
    """Which server the data favours, naming the comparisons beyond noise (in italics: a point's
    label holds commas)."""
    def beyond(better: bool) -> dict[str, str]:
        hits = {s: f[~f.noise.astype(bool) & ((f.ratio > 1) == better)].point for s, f in columns.items()}
        return {s: " and ".join(f"*{p}*" for p in points) for s, points in hits.items() if len(points)}

    ahead, behind = beyond(True), beyond(False)
    if not ahead:
        losses = "; ".join(f"{s} is behind in {p}" for s, p in behind.items())
        return (f"**From this run:** {REFERENCE_SERVER}. No server is ahead of it beyond noise in any "
                f"comparison{'; ' + losses if losses else ''}.")
    wins = "; ".join(f"{s} is ahead in {p}" + (f", behind in {behind[s]}" if s in behind else "")
                     for s, p in ahead.items())
    clean = [s for s in ahead if s not in behind]
    pick = f"{clean[0]}, never behind {REFERENCE_SERVER}" if clean else "no single server"
    return f"**From this run:** {pick}. Beyond noise: {wins}."


def server_columns(ds: Dataset, run: str) -> dict[str, pd.DataFrame]:
    """Comparisons of every measured server but the reference, in ``run`` (computed once: the
    Home and Servers pages quote them, and every run's verdict reads every comparable run's)."""
    def compute() -> dict[str, pd.DataFrame]:
        others = [e["id"] for e in servers(ds, run) if e["measured"] and e["id"] != REFERENCE_SERVER]
        found = {s: comparisons(ds, run, s) for s in sorted(others, key=server_rank)}
        return {s: f for s, f in found.items() if not f.empty}

    return dict(ds.memo(("server_columns", run), compute))


def verdict(ds: Dataset, run: str, brief: bool = False) -> str:
    """The recommendation of ``run``, or the disagreement of comparable runs about it (``brief``:
    how many disagree, for the home page; the Servers page quotes each run's verdict)."""
    def said(text: str) -> str:  # the pick and every verdict beyond noise, not only the pick
        return text.replace("**From this run:** ", "")

    text = recommendation(server_columns(ds, run))
    others = {r: recommendation(server_columns(ds, r)) for r in same_method_runs(ds, run)
              if r != run and server_columns(ds, r)}
    differ = {r: said(t) for r, t in others.items() if said(t) != said(text)}
    if not differ:
        return text + {0: "", 1: " The other comparable run agrees."}.get(
            len(others), f" The {len(others)} other comparable runs agree.")
    listed = (f"{len(differ)} of {len(others)} runs, each quoted on the Servers page" if brief
              else "; ".join(f"run `{r}`: {t}" for r, t in differ.items()))
    return (text.replace("**From this run:**", "**This run alone:**") + f" Other runs of the same method on "
            f"this machine disagree ({listed}), so this is not a recommendation.")


def servers_table(ds: Dataset, run: str) -> str:
    """Server, version, allocator and status; long reasons go to footnotes."""
    rows, notes, elsewhere = [], [], dragonfly_runs(ds)
    for entry in servers(ds, run):
        status = "measured"
        if not entry["measured"]:
            notes.append(f"[^{entry['id']}]: {entry.get('reason') or 'no reason recorded'}. "
                         f"Measure with `{entry.get('command') or 'nox -s bench'}`.")
            status = f"not measured[^{entry['id']}]"
            if entry["id"] == DRAGONFLY and elsewhere:  # the reason of this run stays visible
                status = (f"not measured in this run[^{entry['id']}]; measured in run "
                          f"`{elsewhere[-1]}`, [below](#dragonfly)")
        rows.append({"server": entry["id"], "version": entry.get("version") or MISSING,
                     "allocator": entry.get("allocator") or MISSING, "status": status})
    return md_table(pd.DataFrame(rows)) + ("\n\n" + "\n".join(notes) if notes else "")


def servers_section(ds: Dataset, prefix: str = "") -> str:
    """Ratios of every measured server to Valkey 9.1, with whiskers, noise and a verdict."""
    run = primary_run(ds, "process")
    if run is None:
        return no_data("any server")
    columns = server_columns(ds, run)
    if not columns:
        return servers_table(ds, run) + "\n\n" + source(ds, run, prefix)
    return (f"{servers_table(ds, run)}\n\n{ratio_table(columns, [p.label for p in COMPARED])}\n\n"
            f"{chart(ratio_bars(columns, 'Against ' + REFERENCE_SERVER, REFERENCE_SERVER), 'servers')}\n\n"
            f"{verdict(ds, run)}\n\n{source(ds, run, prefix)}\n")


def dragonfly_runs(ds: Dataset) -> list[str]:
    """Runs that measured Dragonfly, newest last."""
    return [r for r in ds.runs.index if any(e["id"] == DRAGONFLY and e["measured"] for e in servers(ds, r))]


def flags(entry: dict[str, Any], config: str) -> str:
    """The flags of one configuration, without per-run ports and folders."""
    skip = ("--port", "--bind", "--dir", "--log_dir", "--dbfilename")
    flags = entry["configs"].get(config, {}).get("flags") or []
    return shlex.join(f for f in flags if not f.startswith(skip))


CEILING = "evalsha_c1_ops_per_s"  # one EVALSHA at a time: what a loaded host slows first
LOADED_BELOW = 0.6  # a run whose ceiling falls below this share of the main run's is flagged


def ceiling(ds: Dataset, run_id: str) -> float | None:
    """One EVALSHA at a time on Valkey 9.1 in ``run_id`` (median), None when not measured."""
    rows = select(ds.summary, run_id=run_id, scenario="reference", server=REFERENCE_SERVER,
                  metric=CEILING, config="default")
    return float(rows["median"].iloc[0]) if len(rows) else None


def yardsticks(ds: Dataset, run: str) -> list[str]:
    """The other runs of ``run``'s method on its machine that measured the EVALSHA ceiling."""
    return [r for r in same_method_runs(ds, run) if r != run and ceiling(ds, r) is not None]


def host_speed(ds: Dataset, run: str) -> tuple[float, float, str] | None:
    """(this run's one-at-a-time EVALSHA rate on Valkey 9.1, the yardstick's, the yardstick in
    words), None when either was not measured or ``run`` is the main run. The yardstick is the
    median of the other runs of the same method on the same machine: another machine's rate (or
    another method's) says nothing of whether this host was busy. With none, the main run's,
    named as another machine."""
    main = primary_run(ds, "reference")
    here = ceiling(ds, run)
    if main is None or main == run or here is None:
        return None
    peers = {r: c for r in yardsticks(ds, run) if (c := ceiling(ds, r)) is not None}
    if peers:
        named = ", ".join(f"`{r}`" for r in peers)
        many = len(peers) > 1
        return here, float(pd.Series(list(peers.values())).median()), (
            f"the other run{'s' * many} of the same method on the same machine "
            f"({'median of ' * many}{named})")
    there = ceiling(ds, main)
    if there is None:
        return None
    return here, there, f"run `{main}`, another machine ({machine(ds, main)})"


def loaded_host(ds: Dataset, run: str) -> tuple[float, str] | None:
    """This run's EVALSHA ceiling as a share of its yardstick's, and the yardstick in words, when
    it is low enough to flag."""
    speed = host_speed(ds, run)
    return (speed[0] / speed[1], speed[2]) if speed and speed[0] / speed[1] < LOADED_BELOW else None


def loaded_host_note(ds: Dataset, run: str) -> str:
    """A warning above a run made on a host much slower (or busier) than its yardstick."""
    speed = host_speed(ds, run)
    if speed is None or speed[0] / speed[1] >= LOADED_BELOW:
        return ""
    here, there, against = speed
    return admonition(
        "warning", "Measured on a slower or busier host",
        f"In this run {REFERENCE_SERVER} answered {fmt(here)} EVALSHA/s one at a time, against "
        f"{fmt(there)} for {against} ({times(here / there)}). Ratios within the run still compare like "
        "with like, but a starved host can favour one server's design over another's (Dragonfly runs "
        "several threads, Valkey one): read these ratios as this host's, to be confirmed on a quiet one.")


def dragonfly_block(ds: Dataset, run: str, prefix: str) -> str:
    """Both lock modes as ratios to the Valkey 9.1 of the same run, and what was not tested."""
    entry, tag = next(e for e in servers(ds, run) if e["id"] == DRAGONFLY), run[-6:]
    modes = {f"hashtag lock[^df-{tag}-a]": "default", f"global lock[^df-{tag}-b]": "global-lock"}
    columns = {label: comparisons(ds, run, DRAGONFLY, cfg) for label, cfg in modes.items()}
    points = [p.label for p in COMPARED if any(p.label in set(f.point) for f in columns.values())]
    shown = {m.split("[")[0]: f for m, f in columns.items() if not f.empty}
    return (f"{loaded_host_note(ds, run)}\n\n"
            f"Dragonfly {entry.get('version') or ''} against {REFERENCE_SERVER} measured in the same run; "
            f"above 1 is better.\n\n{ratio_table(columns, points)}\n\n"
            f"[^df-{tag}-a]: `{flags(entry, 'default')}`\n[^df-{tag}-b]: `{flags(entry, 'global-lock')}`\n\n"
            f"{chart(ratio_bars(shown, 'Dragonfly lock modes', REFERENCE_SERVER), f'dragonfly-{run[:15]}')}"
            f"\n\n{not_tested(ds, run, entry)}\n\n{source(ds, run, prefix)}\n")


def not_tested(ds: Dataset, run: str, entry: dict[str, Any]) -> str:
    """Scenarios, configurations and cells with no Dragonfly figure in ``run``."""
    measured = set(select(ds.summary, run_id=run, server=DRAGONFLY).scenario)
    lines = [f"- scenario `{s}`: not run on Dragonfly" for s in sorted(set(ds.summary.scenario) - measured)]
    lines += [f"- configuration `{name}`: {cfg.get('reason') or 'not applicable'}"
              for name, cfg in entry["configs"].items() if not cfg.get("applicable", True)]
    lines += [f"- `{f['scenario']}` in `{f['config']}` ({params_text(f.get('params', {}))}): failed, "
              f"{f['error']}"
              for f in ds.runs.loc[run].doc.get("failures") or [] if f["server"] == DRAGONFLY]
    return "Not tested on Dragonfly here:\n\n" + "\n".join(lines) if lines else ""


def dragonfly_section(ds: Dataset, prefix: str = "") -> str:
    """Every Dragonfly run, each on its own (never joined with another run)."""
    runs = dragonfly_runs(ds)
    if not runs:
        return no_data("Dragonfly")
    return "\n\n".join(dragonfly_block(ds, r, prefix) for r in reversed(runs))


SECTIONS = {"servers_section": servers_section, "dragonfly_section": dragonfly_section}
