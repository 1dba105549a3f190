"""Helpers shared by the page modules: which run a section shows, captions, notes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import wraps
from typing import Any

import pandas as pd

from bench.report.compare import select
from bench.report.load import CASE, Dataset
from bench.report.text import BENCH_COMMAND, admonition, fmt_stat, metric_label, no_data, source_line

DRAGONFLY = "dragonfly"
REFERENCE_SERVER = "valkey-9.1"
SERVER_ORDER = ("valkey-9.1", "valkey-8.1", "redis-8.2", "redis-7.0", DRAGONFLY)
DEFAULT_PYTHON = "3.11"  # the default runtime's interpreter (the Runtimes page's baseline)


def default_client(doc: dict[str, Any]) -> bool:
    """Whether a result file measured the default client only: redis-py on the standard asyncio
    loop (not a ``--driver`` or ``--loop`` variant run, nor a run with ``--beside`` twins among its
    cases: those feed the Runtimes page)."""
    method = doc["method"]
    return (method.get("driver", "redis-py") == "redis-py" and method.get("loop", "asyncio") == "asyncio"
            and not method.get("beside"))


def default_runtime(doc: dict[str, Any]) -> bool:
    """The default client on the default interpreter."""
    return default_client(doc) and doc["environment"]["python"].startswith(DEFAULT_PYTHON + ".")


def server_rank(server: str) -> tuple[int, str]:
    """Order servers as the docs list them: newest Valkey first, Dragonfly last."""
    return (SERVER_ORDER.index(server), "") if server in SERVER_ORDER else (99, server)


def servers(ds: Dataset, run_id: str) -> list[dict[str, Any]]:
    """The ``servers`` entries of a run, in display order."""
    return sorted(ds.runs.loc[run_id].doc["servers"], key=lambda e: server_rank(e["id"]))


def machine(ds: Dataset, run: str) -> str:
    """``vm, AMD EPYC, 2 cores``: what a run's absolute figures depend on."""
    found = ds.runs.loc[run]
    return f"{found.machine}, {found.cpu}, {found.cores} cores"


def by_run(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A table whose rows carry their run (column ``run``) and the note above it: the column
    (the end of each run's id) and a note to compare rows of one run only when the rows come from
    several runs, since those may be other machines or commits; neither for one run."""
    if frame["run"].nunique() == 1:
        return frame.drop(columns="run"), ""
    note = ("The rows come from more than one run (column *run*, the end of its id; the sources below "
            "name each run's machine and commit): compare rows of the same run only.\n\n")
    return frame.assign(run=frame["run"].map(lambda r: f"`{r.rsplit('-', 1)[-1]}`")), note


def server_label(ds: Dataset, run_id: str, server: str) -> str:
    """``valkey-9.1 (9.1.2, libc malloc)``."""
    entry = next((e for e in servers(ds, run_id) if e["id"] == server), {})
    parts = [entry.get("version"), entry.get("allocator") and f"{entry['allocator']} malloc"]
    details = ", ".join(p for p in parts if p)
    return f"{server} ({details})" if details else server


def primary_run(ds: Dataset, scenario: str) -> str | None:
    """The run a section shows: default client before a --driver/--loop variant run (those feed
    the Runtimes page), full before quick, most servers, then newest.

    Dragonfly does not count: it is shown only as ratios within its own runs, so a run made for
    it (Valkey 9.1 and Dragonfly) never replaces the run that measured the local servers.
    """
    rows = ds.summary[ds.summary.scenario == scenario]
    if rows.empty:
        return None
    runs = ds.runs[ds.runs.run_id.isin(rows.run_id)]
    runs = runs.assign(servers=[sum(e["measured"] and e["id"] != DRAGONFLY for e in doc["servers"])
                                for doc in runs.doc])
    plain = [default_client(doc) for doc in runs.doc]
    runs = runs.assign(full=~runs.quick, plain=plain)
    runs = runs.sort_values(["plain", "full", "servers", "created", "run_id"])
    return str(runs.index[-1])


def primary_server(ds: Dataset, run_id: str, scenario: str) -> str | None:
    """The first server (in display order) with rows of ``scenario`` in the run."""
    found = select(ds.summary, run_id=run_id, scenario=scenario).server.unique().tolist()
    return min(found, key=server_rank) if found else None


def run_rows(ds: Dataset, scenario: str, need: str = "", **where: Any) -> tuple[str, pd.DataFrame] | None:
    """(run, summary rows of ``scenario`` on that run's first server), None when there are none; with
    ``need``, among the runs and servers that measured that metric."""
    pick = replace(ds, summary=ds.summary[ds.summary.metric == need]) if need else ds
    run = primary_run(pick, scenario)
    if run is None:
        return None
    server = primary_server(pick, run, scenario)
    rows = select(ds.summary, run_id=run, scenario=scenario, server=server, **where)
    return None if rows.empty else (run, rows)


def scenario_section(scenario: str, what: str = "", need: str = "", **where: Any
                     ) -> Callable[[Callable[[Dataset, str, pd.DataFrame], str]], Callable[..., str]]:
    """A section over the rows of ``scenario`` that :func:`run_rows` picks: the body gets
    ``(ds, run, rows)``; the no-data note (naming ``what``) and the source line are added here."""
    def wrap(body: Callable[[Dataset, str, pd.DataFrame], str]) -> Callable[..., str]:
        @wraps(body)
        def section(ds: Dataset, prefix: str = "") -> str:
            found = run_rows(ds, scenario, need, **where)
            if found is None:
                return no_data(what or f"the `{scenario}` scenario")
            return f"{body(ds, *found)}\n\n{source(ds, found[0], prefix)}\n"
        return section
    return wrap


def defaults_note(ds: Dataset, run: str | None, keys: dict[str, object]) -> str:
    """The library's defaults now, and at the measured commit where the file records others."""
    recorded = (ds.runs.loc[run].doc.get("library_defaults") or {}) if run else {}
    parts = []
    for key, now in keys.items():
        then = recorded.get(key)
        moved = f" ({then} when measured)" if then is not None and then != now else ""
        parts.append(f"`{key.split('.')[-1]}={now}`{moved}")
    return "The library's defaults: " + ", ".join(parts) + "."


def stat_cell(row: pd.Series | None, suffix: str = "") -> str:
    """Median and spread of a summary row (``suffix="_base"``: of the base a :func:`versus` row
    joined); see :func:`fmt_stat`."""
    if row is None:
        return fmt_stat(None)
    return fmt_stat(row[f"median{suffix}"], row[f"mad{suffix}"], int(row[f"n{suffix}"]),
                    row.get(f"min{suffix}"), row.get(f"max{suffix}"))


def extras(ds: Dataset, rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The ``extra`` record (harness details) of each summary row's case."""
    extra = ds.cases.set_index(["run_id", "server", "config", "case"]).extra
    return [extra.get(key, {}) for key in zip(rows.run_id, rows.server, rows.config, rows.case, strict=True)]


def source(ds: Dataset, run_id: str, prefix: str) -> str:
    """The source line of a run, with its quick-run warning."""
    return source_line(ds.runs.loc[run_id], prefix)


def status(ds: Dataset, prefix: str = "") -> str:
    """Top-of-page note when there are no result files at all."""
    if not ds.empty:
        return ""
    return admonition("warning", "No results yet",
                      "This site renders every figure from result files under `results/`, and "
                      f"there are none yet. Make them with:\n\n```sh\n{BENCH_COMMAND}\n```\n\nthen "
                      "rebuild the site with `nox -s docs`. See "
                      "[Methodology & reproduce](methodology.md).")


def variant(row: pd.Series) -> str:
    """``baseline`` or what differs from it: ``aof-always``, ``RESP2``, ``python parser``."""
    parts = [row.config] if row.config not in ("default", "external") else []
    parts += [f"RESP{row.protocol}"] if row.protocol != 3 else []
    parts += [f"{row.parser} parser"] if row.parser != "hiredis" else []
    return ", ".join(parts) or "baseline"


PARAM_LABELS = {"payload_bytes": "payload (B)", "pool_size": "pool size", "load": "load"}


def exactly_once(case: pd.Series) -> str:
    """``3,000 ✓`` when every enqueued job was acked once, else the accounting."""
    if pd.isna(case.get("enqueued")):
        return "n/a"
    done, total = int(case.acked), int(case.enqueued)
    if done == total and not case.lost and not case.duplicates:
        return f"{total:,} \N{CHECK MARK}"
    return f"{done:,}/{total:,} acked, {int(case.lost)} lost, {int(case.duplicates)} dup."


def wide(ds: Dataset, rows: pd.DataFrame, by: list[str], metrics: list[str],
         once: bool = False) -> pd.DataFrame:
    """One table row per value of ``by``: median and spread of each metric, labelled headers.

    ``once`` adds the exactly-once accounting of each case.
    """
    rows = rows[rows.metric.isin(metrics)]
    cells = rows.assign(cell=[stat_cell(r) for _, r in rows.iterrows()])
    if once:
        cells = cells.merge(ds.cases[[*CASE, "enqueued", "acked", "lost", "duplicates"]],
                            on=CASE, how="left")
        cells["exactly once"] = [exactly_once(c) for _, c in cells.iterrows()]
        by = [*by, "exactly once"]
    table = cells.pivot_table(index=by, columns="metric", values="cell", aggfunc="first",
                              dropna=False, sort=True, observed=True).dropna(how="all")
    table = table[[m for m in metrics if m in table.columns]].reset_index()
    units = dict(zip(rows.metric, rows.unit, strict=False))
    names = {m: metric_label(m, units.get(m, "")) for m in metrics}
    names.update({c: PARAM_LABELS.get(c, c.replace("_", " ")) for c in by})
    return table.rename(columns=names)


SECTIONS = {"results_status": status}
