"""Connection sizing page: connections per role, pool size, exhaustion, the calculator.

Advice appears only where the data supports it, next to the library's defaults (read from
conveyor itself, never typed here).
"""

from __future__ import annotations

import html
import json
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd
from conveyor import QueueSettings
from conveyor._dispatch import WorkerOptions

from bench.report.common import defaults_note, extras, run_rows, scenario_section, server_label, source, wide
from bench.report.compare import THRESHOLD, ratio, ratio_text, select
from bench.report.figures import chart, plot
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, no_data, wrapped

ROLES = ("pump", "waiter", "maint", "other")
WORKER_ROLES = ROLES[:3]  # *other* is the command pools: what the process enqueues, not its worker
PER_QUEUE_ROLES = ("pump", "maint")  # what each queue's worker holds (the waiter is shared)
HEADROOM = 0.25  # spare share on top of the computed total for maxclients
RESERVED = 10  # connections kept for admin tools and monitoring
STEP_TOLERANCE = 0.05  # a line missing a measured count by more is shown as steps
# What each kind of row measures (bench/scenarios/connections.py): the formulas name it, since an
# AsyncWorker from concurrency 8 holds two pumps and two maints where a thread worker holds one.
MEASURED_WORKER = {"roles": "one `AsyncWorker` (an app with an `async def` task)",
                   "queues": "thread workers (an app whose tasks are all plain functions)"}
SETTINGS = QueueSettings()
WORKER_CONCURRENCY = next(f.default for f in fields(WorkerOptions) if f.name == "concurrency")


def _rows(ds: Dataset, kind: str) -> tuple[str, pd.DataFrame] | None:
    return run_rows(ds, "connections", kind=kind, config="default")


def fits(rows: pd.DataFrame, by: str = "concurrency", roles: tuple[str, ...] = ROLES
         ) -> list[dict[str, Any]]:
    """Each role's connections per worker process as ``base + per_<by> x <by>`` when a line
    through the measured counts fits them all; else the measured counts as ``steps`` ([by, count]
    pairs: an AsyncWorker's second pump comes at a concurrency, not a little per slot)."""
    out: list[dict[str, Any]] = []
    for role in roles:
        part = rows[rows.metric == f"connections_{role}"].sort_values(by)
        if part.empty:
            continue
        x, y = part[by].astype(float).to_numpy(), part["median"].to_numpy()
        slope, base = np.polyfit(x, y, 1) if len(set(x)) > 1 else (0.0, float(y.mean()))
        if np.abs(base + slope * x - y).max() > STEP_TOLERANCE:
            out.append({"role": role, "steps": [[int(a), float(b)] for a, b in zip(x, y, strict=True)]})
            continue
        out.append({"role": role, "base": round(float(base), 3) + 0.0,
                    f"per_{by}": round(float(slope), 4) + 0.0})
    return out


def _steps_text(steps: list[list[float]], by: str) -> str:
    """``1 at concurrency 1, 2 at 8 to 100``: runs of equal counts over the measured values."""
    runs: list[list[float]] = []
    for at, count in steps:
        if runs and runs[-1][2] == count:
            runs[-1][1] = at
        else:
            runs.append([at, at, count])
    return ", ".join(f"{fmt(c)} at {by} {fmt(a)}" + (f" to {fmt(b)}" if b != a else "")
                     for a, b, c in runs)


def formula(found: list[dict[str, Any]], by: str = "concurrency") -> str:
    """``pump 1 + waiter 1 + ...`` from the fitted roles (``by``: the fitted variable)."""
    def term(f: dict[str, Any]) -> str:
        if "steps" in f:
            return f"{f['role']} ({_steps_text(f['steps'], by)})"
        base, slope = float(f["base"]), float(f[f"per_{by}"])
        parts = ([fmt(base)] if base or not slope else []) + ([f"{fmt(slope)} x {by}"] if slope else [])
        return f"{f['role']} " + " + ".join(parts)

    return " + ".join(term(f) for f in found)


def role_table(ds: Dataset, rows: pd.DataFrame, by: str) -> str:
    """Connections by role (a column each) and ``by``, measured with CLIENT LIST."""
    table = wide(ds, rows, [by], [f"connections_{r}" for r in (*ROLES, "total")])
    return md_table(table.rename(columns=lambda c: c.replace("connections ", "")))


@scenario_section("connections", kind="roles", config="default")
def connections_roles(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Connections per worker process by role and worker concurrency."""
    scope = (f"Measured at worker concurrency {rows.concurrency.iloc[0]} only: whether a role grows "
             "with concurrency is not measured in this run. " if rows.concurrency.nunique() == 1 else "")
    return f"{server_label(ds, run, rows.iloc[0].server)}. {scope}\n\n{role_table(ds, rows, 'concurrency')}"


@scenario_section("connections", "a worker process over several queues (`connections` scenario)",
                  kind="queues", config="default")
def connections_queues(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Connections of one worker process (``conveyor worker -q``) by role and queues served."""
    measured = formula(fits(rows, "queues", WORKER_ROLES), "queues")
    return (f"{server_label(ds, run, rows.iloc[0].server)}, one worker process with "
            f"concurrency {rows.concurrency.iloc[0]} per queue. Worker connections: **{measured}**.\n\n"
            f"{role_table(ds, rows, 'queues')}")


def queues_formula(ds: Dataset, prefix: str = "") -> str:
    """The measured connections of one worker process as a function of the queues it serves."""
    served = _rows(ds, "queues")
    if served is None:
        return no_data("connection counts over several queues") + "\n"
    slots = sorted({int(c) for c in served[1].get("concurrency", pd.Series(dtype=float)).dropna()})
    at = f" at concurrency {', '.join(map(str, slots))}" if slots else ""
    return (f"Serving several queues (`conveyor worker -q a,b,c`) with {MEASURED_WORKER['queues']}"
            f"{at}, measured per worker process: "
            f"**{formula(fits(served[1], 'queues', WORKER_ROLES), 'queues')}** connections, plus the "
            "command pools of the queues it enqueues to (*other*). Asyncio workers over several queues "
            "are not measured here: each queue's worker holds what one `AsyncWorker` holds at its "
            "concurrency (two pumps and two maints from concurrency 8), with the one shared waiter.\n"
            f"{source(ds, served[0], prefix)}\n\n")


def sizing_formula(ds: Dataset, prefix: str = "") -> str:
    """The deployment formula with the measured per-role terms and the library's defaults."""
    found = _rows(ds, "roles")
    keys = {"queue.pool_size": SETTINGS.pool_size, "queue.pool_timeout": SETTINGS.pool_timeout,
            "worker.concurrency": WORKER_CONCURRENCY}
    defaults = defaults_note(ds, found[0] if found else None, keys)
    measured = (f"Measured per worker process, for {MEASURED_WORKER['roles']}: "
                f"**{formula(fits(found[1]))}** connections.\n\n"
                if found else no_data("per-role connection counts") + "\n") + queues_formula(ds)
    return (measured + "Across a deployment:\n\n```text\nconnections = worker_processes x "
            "per_worker_process\n            + producer_processes x pool_size\nmaxclients >= "
            f"connections x {1 + HEADROOM:g} + {RESERVED}\n```\n\n{defaults}\n")


def pool_advice(rows: pd.DataFrame) -> str:
    """Per caller count: the smallest pool whose jobs/s is within the noise of the largest pool's
    (or within 10% of it), with the ratio and its spread."""
    out = []
    for callers, part in rows.groupby("concurrency", sort=True):
        ordered = part.sort_values("pool_size")
        top = ordered.iloc[-1]
        for _, row in ordered.iloc[:-1].iterrows():
            found = ratio(row, top)
            if found["noise"] or found["ratio"] >= 1 - THRESHOLD:
                how = "within the noise of" if found["noise"] else "as fast as"
                out.append(f"- {callers} concurrent callers: a pool of {int(row.pool_size)} is {how} a pool "
                           f"of {int(top.pool_size)}: jobs/s ratio {ratio_text(found, noise=False)}.")
                break
    return ("Measured here, the pool need not match the calls in flight:\n\n" + "\n".join(out)
            if out else "")


@scenario_section("connections", "a pool-size sweep (`connections` scenario)", kind="pool",
                  config="default")
def pool_section(ds: Dataset, run: str, rows: pd.DataFrame) -> str:
    """Producer throughput by pool size and callers, and what the data says about sizing it."""
    rows = rows[rows.metric == "jobs_per_s"]
    table = wide(ds, rows, ["concurrency", "pool_size"], ["jobs_per_s"])
    fig = plot(rows, "pool_size", "concurrency", lambda k: f"{k} callers", lines=True,
               title="Producer jobs/s by pool size", x_title="pool_size", y_title="jobs/s")
    table = md_table(table.rename(columns={"concurrency": "callers"}))
    return (f"{server_label(ds, run, rows.iloc[0].server)}.\n\n{table}\n\n"
            f"{chart(fig, 'pool-size')}\n\n{pool_advice(rows)}\n\n"
            f"{defaults_note(ds, run, {'queue.pool_size': SETTINGS.pool_size})}")


def exhaustion_section(ds: Dataset, prefix: str = "") -> str:
    """The error a too-small pool produced in the benchmark, and the fix."""
    found = _rows(ds, "too-small")
    text = ""
    if found is not None:
        run, rows = found
        extra = extras(ds, rows.iloc[:1])[0]
        text = (f"Measured with a pool of {rows.iloc[0].pool_size}, {rows.iloc[0].concurrency} "
                f"callers and `pool_timeout={rows.iloc[0].pool_timeout:g}` s: "
                f"{fmt(rows[rows.metric == 'failed_calls']['median'].iloc[0], 0)} calls failed; "
                "the first error was:\n\n"
                + wrapped(f"{extra.get('exception_type')}: {extra.get('exception_message')}")
                + f"\n{source(ds, run, prefix)}\n\n")
    return text


def _input(name: str, label: str, value: object, note: str = "") -> str:
    shown = "" if value is None else html.escape(str(value))
    hint = f' <small class="cv-calc-note">{note}</small>' if note else ""
    return (f'<label>{label} <input name="{name}" type="number" min="0" step="any" '
            f'value="{shown}"></label>{hint}')


def calculator(ds: Dataset, prefix: str = "") -> str:
    """The offline calculator; its defaults are the library's defaults."""
    found = _rows(ds, "roles")
    roles = fits(found[1]) if found else []
    memory = _rows(ds, "memory")
    per_conn = select(memory[1], metric="bytes_per_connection") if memory else pd.DataFrame()
    # Each queue past the first adds one more worker's pump and maint (the waiter is shared). The
    # roles were measured on an AsyncWorker (MEASURED_WORKER) and the queues rows on thread workers,
    # which hold fewer: an extra queue counts the AsyncWorker's own pump and maint at the concurrency
    # entered, so the calculator never adds one kind of worker's terms to the other's.
    per_queue = [r["role"] for r in roles if r["role"] in PER_QUEUE_ROLES]
    spec = {"roles": roles, "per_queue": per_queue, "headroom": HEADROOM, "reserved": RESERVED}
    inputs = [
        _input("workers", "Worker processes", 1),
        _input("concurrency", "Concurrency per worker (per queue)", WORKER_CONCURRENCY,
               "library default"),
        _input("producers", "Producer processes (enqueue only)", 1),
        _input("producer_pool", "Pool size per producer", SETTINGS.pool_size, "library default"),
        _input("bytes_per_connection", "Server memory per connection (bytes)",
               round(per_conn["median"].iloc[0]) if not per_conn.empty else None,
               f"measured in run {memory[0]}" if not per_conn.empty and memory else
               "not measured: enter your server's figure"),
    ]
    if per_queue:
        inputs.insert(2, _input("queues", "Queues per worker process (-q)", 1,
                                "each extra queue: one more AsyncWorker's pump and maint (several queues "
                                "on asyncio are not measured: derived from the one-queue counts)"))
    if not roles:
        inputs.insert(2, _input("per_worker_input", "Connections per worker process", None,
                                "not measured yet: an input"))
    outputs = [("per_worker", "Connections per worker process"), ("total", "Connections in total"),
               ("maxclients", f"Suggested maxclients (x{1 + HEADROOM:g} + {RESERVED})"),
               ("memory", "Server memory for these connections")]
    cells = "".join(f'<tr><td>{label}</td><td data-out="{key}"></td></tr>' for key, label in outputs)
    payload = html.escape(json.dumps(spec, sort_keys=True), quote=True)
    return (f'<div class="cv-calc" id="calc-connections" data-cv-calc="{payload}">'
            f'<form>{"".join(inputs)}</form><table><tbody>{cells}</tbody></table></div>\n')


SECTIONS = {"connections_roles": connections_roles, "connections_queues": connections_queues,
            "queues_formula": queues_formula, "sizing_formula": sizing_formula,
            "pool_section": pool_section, "exhaustion_section": exhaustion_section,
            "calculator": calculator}
