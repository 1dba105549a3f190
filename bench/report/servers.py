"""Servers page: every server as a ratio to Valkey 9.1 of the same run, with whiskers.

Ratios are oriented so that above 1 is better (for latency and memory, the reference divided
by the server). Dragonfly is shown only against the Valkey 9.1 of its own run.
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd
import plotly.graph_objects as go  # type: ignore[import-untyped]

from bench.report.common import DRAGONFLY, REFERENCE_SERVER, primary_run, server_rank, servers, source
from bench.report.compare import prefer, ratio, same_method_runs, select
from bench.report.figures import chart, figure, whiskers
from bench.report.load import Dataset, same_method
from bench.report.text import MISSING, md_table, no_data, params_text, span, times

# (label, scenario, metric, higher is better, preferred params): stated, like-for-like points.
POINTS: tuple[tuple[str, str, str, bool, dict[str, Any]], ...] = (
    ("lifecycle, 64 B, 8 tasks", "lifecycle", "lifecycles_per_s", True,
     {"payload_bytes": 64, "concurrency": 8}),
    ("process, concurrency 32", "process", "jobs_per_s", True, {"concurrency": 32}),
    ("enqueue, one per call", "enqueue-single", "jobs_per_s", True, {}),
    ("enqueue_many, 1 producer", "enqueue-bulk", "jobs_per_s", True, {"producers": 1}),
    ("latency p99, unloaded", "latency", "p99_ms", False, {"load": "unloaded"}),
    ("memory per job, 1 KiB", "memory", "bytes_per_job", False, {"payload_bytes": 1024}),
)


def comparisons(ds: Dataset, run: str, server: str, config: str = "default") -> pd.DataFrame:
    """``server``/``config`` against Valkey 9.1 (default) of ``run``: one row per point."""
    same_method(ds, [run], f"servers comparison in run {run}")
    out = []
    for label, scenario, name, higher, wanted in POINTS:
        rows = select(ds.summary, run_id=run, scenario=scenario, metric=name,
                      protocol=3, parser="hiredis")
        ref = prefer(select(rows, server=REFERENCE_SERVER, config="default"), wanted)
        other = select(rows, server=server, config=config)
        pair = ref.merge(other, on="case", suffixes=("_ref", ""))
        if pair.empty:
            continue
        row = pair.iloc[0]
        a = pd.Series({k: row[k] for k in ("median", "min", "max", "n")})
        b = pd.Series({k: row[f"{k}_ref"] for k in ("median", "min", "max", "n")})
        out.append({"point": label, **(ratio(a, b) if higher else ratio(b, a))})
    return pd.DataFrame(out, columns=["point", "ratio", "lo", "hi", "noise"])


def cell(found: pd.DataFrame, point: str) -> str:
    """``1.21x (1.15 to 1.30)`` or ``0.98x (0.90 to 1.05), noise``."""
    row = found[found.point == point]
    if row.empty:
        return MISSING
    r = row.iloc[0]
    return f"{times(r.ratio)} ({span(r.lo, r.hi)}){', noise' if r.noise else ''}"


def ratio_table(columns: dict[str, pd.DataFrame], points: list[str]) -> str:
    """One row per comparison point, one column of ratio cells per server or mode."""
    return md_table(pd.DataFrame({"comparison": points,
                                  **{s: [cell(f, p) for p in points] for s, f in columns.items()}}))


def ratio_chart(columns: dict[str, pd.DataFrame], chart_id: str, title: str) -> str:
    """Grouped bars of ratios with whiskers; noise bars are pale and labelled."""
    fig = figure(f"{title} (pale: noise)", "",
                 f"ratio to {REFERENCE_SERVER} (above 1 = better)", category_x=True)
    for name, found in columns.items():
        fig.add_trace(go.Bar(x=found.point.str.replace(", ", ",<br>"), y=found.ratio, name=name,
                             error_y=whiskers(found, "ratio", "lo", "hi"),
                             text=["noise" if n else "" for n in found.noise], textangle=0,
                             textposition="inside", insidetextanchor="start",
                             textfont={"size": 9},
                             marker={"opacity": [0.35 if n else 1.0 for n in found.noise]}))
    fig.add_hline(y=1, line_dash="dot")
    fig.update_xaxes(tickangle=0)
    return chart(fig, chart_id)


def recommendation(columns: dict[str, pd.DataFrame]) -> str:
    """Which server the data favours, naming the comparisons beyond noise."""
    def beyond(found: pd.DataFrame, better: bool) -> list[str]:
        hits = found[~found.noise & ((found.ratio > 1) == better)]
        return hits.point.tolist()

    ahead = {s: beyond(f, True) for s, f in columns.items() if beyond(f, True)}
    behind = {s: beyond(f, False) for s, f in columns.items() if beyond(f, False)}
    if not ahead:
        losses = "; ".join(f"{s} is behind in {', '.join(p)}" for s, p in behind.items())
        return (f"**From this run:** {REFERENCE_SERVER}. No server is ahead of it beyond noise "
                f"in any comparison{'; ' + losses if losses else ''}.")
    wins = "; ".join(f"{s} is ahead in {', '.join(p)}"
                     + (f" and behind in {', '.join(behind[s])}" if s in behind else "")
                     for s, p in ahead.items())
    clean = [s for s in ahead if s not in behind]
    pick = f"{clean[0]}, never behind {REFERENCE_SERVER}" if clean else "no single server"
    return f"**From this run:** {pick}. Beyond noise: {wins}."


def server_columns(ds: Dataset, run: str) -> dict[str, pd.DataFrame]:
    """Comparisons of every measured server but the reference, in ``run``."""
    others = [e["id"] for e in servers(ds, run) if e["measured"] and e["id"] != REFERENCE_SERVER]
    found = {s: comparisons(ds, run, s) for s in sorted(others, key=server_rank)}
    return {s: f for s, f in found.items() if not f.empty}


def verdict(ds: Dataset, run: str) -> str:
    """The recommendation of ``run``, or the disagreement of comparable runs about it."""
    text = recommendation(server_columns(ds, run))
    others = {r: recommendation(server_columns(ds, r)) for r in same_method_runs(ds, run)
              if r != run and server_columns(ds, r)}
    differ = {r: t for r, t in others.items() if t.split(".")[0] != text.split(".")[0]}
    if not differ:
        agree = {0: "", 1: " The other comparable run agrees."}
        return text + agree.get(len(others), f" The {len(others)} other comparable runs agree.")
    listed = "; ".join(f"run `{r}`: {t.split('.')[0].replace('**From this run:** ', '')}"
                       for r, t in differ.items())
    return (text.replace("**From this run:**", "**This run alone:**")
            + f" Other runs of the same method on this machine disagree ({listed}), so this "
            "is not a recommendation.")


def servers_table(ds: Dataset, run: str) -> str:
    """Server, version, allocator and status; long reasons go to footnotes."""
    rows, notes = [], []
    elsewhere = dragonfly_runs(ds)
    for entry in servers(ds, run):
        status = "measured"
        if not entry["measured"] and entry["id"] == DRAGONFLY and elsewhere:
            status = f"in run `{elsewhere[-1]}`, [below](#dragonfly)"
        elif not entry["measured"]:
            notes.append(f"[^{entry['id']}]: {entry.get('reason') or 'no reason recorded'}. "
                         f"Measure with `{entry.get('command') or 'nox -s bench'}`.")
            status = f"not measured[^{entry['id']}]"
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
    table = ratio_table(columns, [p[0] for p in POINTS])
    return (f"{servers_table(ds, run)}\n\nRatio to {REFERENCE_SERVER} in the same run, median "
            "(whiskers: worst to best pairing of repetitions); above 1 is better. "
            "Baseline configuration, RESP3, hiredis. *noise*: the repetitions' ranges overlap "
            f"or the difference is under 10%.\n\n{table}\n\n"
            f"{ratio_chart(columns, 'servers', 'Against ' + REFERENCE_SERVER)}\n\n"
            f"{verdict(ds, run)}\n\n{source(ds, run, prefix)}\n")


def dragonfly_runs(ds: Dataset) -> list[str]:
    """Runs that measured Dragonfly, newest last."""
    return [r for r in ds.runs.index
            if any(e["id"] == DRAGONFLY and e["measured"] for e in servers(ds, r))]


def flags(entry: dict[str, Any], config: str) -> str:
    """The flags of one configuration, without per-run ports and folders."""
    raw = entry["configs"].get(config, {}).get("flags") or []
    kept = [f for f in raw if not f.startswith(("--port", "--bind", "--dir", "--log_dir",
                                                "--dbfilename"))]
    return shlex.join(kept)


def dragonfly_block(ds: Dataset, run: str, prefix: str) -> str:
    """Both lock modes as ratios to the Valkey 9.1 of the same run, and what was not tested."""
    entry = next(e for e in servers(ds, run) if e["id"] == DRAGONFLY)
    tag = run[-6:]
    modes = {f"hashtag lock[^df-{tag}-a]": "default", f"global lock[^df-{tag}-b]": "global-lock"}
    columns = {label: comparisons(ds, run, DRAGONFLY, cfg) for label, cfg in modes.items()}
    points = [p[0] for p in POINTS if any(p[0] in set(f.point) for f in columns.values())]
    table = ratio_table(columns, points)
    chart_cols = {m.split("[")[0]: f for m, f in columns.items() if not f.empty}
    return (f"Dragonfly {entry.get('version') or ''} against {REFERENCE_SERVER} measured in the "
            f"same run; above 1 is better.\n\n{table}\n\n"
            f"[^df-{tag}-a]: `{flags(entry, 'default')}`\n"
            f"[^df-{tag}-b]: `{flags(entry, 'global-lock')}`\n\n"
            f"{ratio_chart(chart_cols, f'dragonfly-{run[:15]}', 'Dragonfly lock modes')}\n\n"
            f"{not_tested(ds, run, entry)}\n\n{source(ds, run, prefix)}\n")


def not_tested(ds: Dataset, run: str, entry: dict[str, Any]) -> str:
    """Scenarios, configurations and cells with no Dragonfly figure in ``run``."""
    measured = set(ds.summary.loc[(ds.summary.run_id == run)
                                  & (ds.summary.server == DRAGONFLY), "scenario"])
    everywhere = set(ds.summary.scenario)
    lines = [f"- scenario `{s}`: not run on Dragonfly" for s in sorted(everywhere - measured)]
    lines += [f"- configuration `{name}`: {cfg.get('reason') or 'not applicable'}"
              for name, cfg in entry["configs"].items() if not cfg.get("applicable", True)]
    lines += [f"- `{f['scenario']}` in `{f['config']}` ({params_text(f.get('params', {}))}): "
              f"failed, {f['error']}"
              for f in ds.runs.loc[run].doc.get("failures") or [] if f["server"] == DRAGONFLY]
    return "Not tested on Dragonfly here:\n\n" + "\n".join(lines) if lines else ""


def dragonfly_section(ds: Dataset, prefix: str = "") -> str:
    """Every Dragonfly run, each on its own (never joined with another run)."""
    runs = dragonfly_runs(ds)
    if not runs:
        return no_data("Dragonfly")
    return "\n\n".join(dragonfly_block(ds, run, prefix) for run in reversed(runs))


SECTIONS = {"servers_section": servers_section, "dragonfly_section": dragonfly_section}
