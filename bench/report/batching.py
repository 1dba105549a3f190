"""Tuning page, batching goals: the targets set for ``batch_enqueue`` and the lone ``enqueue``,
met or not, and where not, why, computed from the same run's ``enqueue-single`` cases (per-call
rates, percentiles, the producer's CPU per job, the held PINGs and the server's script time).
Nothing here is typed in: every figure is read from the run with the callers sweep that the
Performance page shows (see ``sweep_run``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import pandas as pd

from bench.report.common import default_runtime, primary_run, server_label, server_rank, source
from bench.report.compare import BASELINE, THRESHOLD, ratio, select
from bench.report.load import Dataset
from bench.report.text import fmt, md_table, no_data, pct, span, times, times_beside

SCENARIO = "enqueue-single"
CALLERS = 32  # the concurrent case the goals name
NEEDS = "the `enqueue-single` sweep (one caller with batching off, 32 callers with batching on)"


class Goal(NamedTuple):
    """A ratio of two cells of the sweep, ``(callers, batching, metric)`` each, and its bound."""

    name: str
    top: tuple[int, bool, str]
    bottom: tuple[int, bool, str]
    bound: float
    at_least: bool  # True: the ratio must reach the bound; False: stay at or below it


GOALS = (
    Goal(f"{CALLERS} callers, batching on: jobs/s ÷ one caller, batching off", (CALLERS, True, "jobs_per_s"),
         (1, False, "jobs_per_s"), 5.0, True),
    Goal(f"{CALLERS} callers, batching on: p99 ÷ one caller's p99, batching off", (CALLERS, True, "p99_ms"),
         (1, False, "p99_ms"), 2.0, False),
    Goal("one caller: jobs/s with batching on ÷ off", (1, True, "jobs_per_s"), (1, False, "jobs_per_s"),
         0.97, True),
    Goal("one caller, batching off: enqueue ÷ client.ping()", (1, False, "vs_ping_client"), (1, False, ""),
         0.85, True),
    Goal("one caller, batching on (the default): enqueue ÷ client.ping()", (1, True, "vs_ping_client"),
         (1, True, ""), 0.85, True),
    Goal("one caller, batching off: enqueue ÷ a held PING", (1, False, "vs_ping_held"), (1, False, ""),
         0.85, True),
    Goal("one caller, batching on (the default): enqueue ÷ a held PING", (1, True, "vs_ping_held"),
         (1, True, ""), 0.85, True),
)


def sweep_run(ds: Dataset) -> tuple[str, str] | None:
    """(run, server) of the default-runtime run with the sweep that the Performance page would pick
    (full, most servers, then newest: ``primary_run``), or None. Not simply the newest: a later
    two-server run made for the Runtimes page measures the same cells again, and the Tuning page
    then gave other ratios than the Performance page it is linked from, for the same cells."""
    rows = select(ds.summary, scenario=SCENARIO, callers=CALLERS, batching=True, metric="p99_ms", **BASELINE)
    rows = rows[rows.run_id.map(lambda r: default_runtime(ds.runs.loc[r].doc)).astype(bool)]
    run = primary_run(replace(ds, summary=rows), SCENARIO)
    if run is None:
        return None
    return run, min(rows[rows.run_id == run].server.unique().tolist(), key=server_rank)


class Cells:
    """The sweep's cells (summary rows) on one server of one run."""

    def __init__(self, rows: pd.DataFrame) -> None:
        self.rows = rows

    def row(self, callers: int, batching: bool, metric: str) -> pd.Series | None:
        hit = select(self.rows, callers=callers, batching=batching, metric=metric)
        return None if hit.empty else hit.iloc[0]

    def get(self, callers: int, batching: bool, metric: str) -> float | None:
        found = self.row(callers, batching, metric)
        return None if found is None else float(found["median"])

    def compared(self, goal: Goal) -> dict[str, Any] | None:
        """The goal's ratio: of its two cases as the project compares them (ratio of medians,
        whiskers, noise; ``compare.ratio``), or a ratio metric of its own; None if not measured."""
        top = self.row(*goal.top)
        if top is None:
            return None
        if not goal.bottom[2]:
            return {"ratio": float(top["median"]), "noise": False}
        bottom = self.row(*goal.bottom)
        return None if bottom is None else ratio(top, bottom)


def _p99_why(c: Cells) -> str:
    rate, lone = c.get(CALLERS, True, "jobs_per_s"), c.get(1, False, "p99_ms")
    if rate is None or lone is None:
        return ""
    p50 = c.get(CALLERS, True, "p50_ms")
    text = (f"Each of the {CALLERS} callers sends its next job only when its previous one returned (a closed "
            f"loop), so the mean time per call is callers ÷ jobs/s (Little's law): {CALLERS} ÷ {fmt(rate)} "
            f"jobs/s = {fmt(CALLERS / rate * 1e3)} ms (p50 measured {fmt(p50)} ms). "
            f"A p99 within 2x the lone caller's {fmt(lone)} ms, {fmt(2 * lone)} ms, would need at least "
            f"{fmt(CALLERS / (2 * lone) * 1e3)} jobs/s at {CALLERS} callers even with no spread at all.")
    cpu = c.get(CALLERS, True, "client_cpu_us_per_job")
    if cpu is not None:
        text += (f" The producer spent {fmt(cpu)} µs of CPU per job there, {pct(cpu * rate / 1e6)} of one "
                 "core at that rate: its calls, their futures and the callers' wake-ups take turns on one "
                 "core while the server works.")
    more = select(c.rows, batching=True, metric="jobs_per_s")
    more = more[more.callers > CALLERS]
    if not more.empty:
        top = more.sort_values("callers").iloc[-1]
        text += (f" With {int(top.callers)} callers, whose calls carry more jobs each, the same run reached "
                 f"{fmt(float(top['median']))} jobs/s.")
    return text


def _call_times(c: Cells, batching: bool, ping_metric: str) -> tuple[float, float] | None:
    """µs per PING (``ping_metric``'s rate) and per enqueue of the lone caller's case, or None."""
    ping, rate = c.get(1, batching, ping_metric), c.get(1, batching, "jobs_per_s")
    return None if ping is None or rate is None else (1e6 / ping, 1e6 / rate)


def _client_ping_why(c: Cells, batching: bool) -> str:
    if (times_us := _call_times(c, batching, "ping_client_ops_per_s")) is None:
        return ""
    ping_us, call_us = times_us
    return (f"`client.ping()` is a PING as redis-py usually sends it, one at a time on the same client, "
            f"the measure the goal was set with: {fmt(ping_us)} µs per call, so 0.85x allows an enqueue "
            f"{fmt(ping_us / 0.85)} µs; it took {fmt(call_us)} µs. The enqueue skips redis-py's per-command "
            "layers that this PING pays for (it writes its script call straight on a held connection), so "
            "the rows against a held PING below, which pays for none, say where the difference goes.")


def _ping_why(c: Cells, batching: bool) -> str:
    if (times_us := _call_times(c, batching, "ping_held_ops_per_s")) is None:
        return ""
    ping_us, call_us = times_us
    text = (f"A held PING took {fmt(ping_us)} µs per round trip, so 0.85x allows an enqueue "
            f"{fmt(ping_us / 0.85)} µs, {fmt(ping_us / 0.85 - ping_us)} µs more than a PING; it took "
            f"{fmt(call_us)} µs, {fmt(call_us - ping_us)} µs more.")
    script = c.get(1, batching, "server_script_us_per_call")
    cpu, ping_cpu = c.get(1, batching, "client_cpu_us_per_job"), c.get(1, batching, "ping_held_client_cpu_us")
    if script is None or cpu is None or ping_cpu is None:
        return text + (" Where the difference goes (the server's script time, the producer's CPU per PING) "
                       "was not recorded in this run: a run with the current suite records it."
                       ) + _set_floor(c, batching)
    extra, rest = cpu - ping_cpu, call_us - ping_us - script - (cpu - ping_cpu)
    how = "building, encoding and checking the job, a longer request and reply"
    floor = ping_us / (ping_us + script + max(rest, 0.0))
    return text + (f" Of that, the server ran the enqueue script for {fmt(script)} µs per call (`INFO "
                   f"commandstats`, where a PING runs none), and the producer spent {fmt(extra)} µs more CPU "
                   f"per call than per PING ({fmt(cpu)} against {fmt(ping_cpu)} µs: {how}); "
                   f"{fmt(rest)} µs remain (the server reading and writing the larger command, wake-ups). "
                   f"With no producer CPU beyond a PING's, the script and that remainder alone would leave "
                   f"{times(floor)}.") + _set_floor(c, batching)


def _set_floor(c: Cells, batching: bool) -> str:
    """What one plain write measured the same way costs against a PING ('' for runs without it)."""
    sets = c.get(1, batching, "set_held_vs_ping_held")
    if sets is None:
        return ""
    return (f" One plain write sent the same way, a `SET` of the same payload to one key on the held "
            f"connection, ran at {times(sets)} the held PINGs' rate in the same case, "
            f"{'above' if sets >= 0.85 else 'below'} the goal's 0.85x; an enqueue writes three keys in "
            "one script call (the id counter, the job's hash and the waiting list).")


def _noise(goal: Goal, c: Cells, found: dict[str, Any]) -> str:
    text = (f"From the worst to the best pairing of the two cases' repetitions the ratio runs "
            f"{span(found['lo'], found['hi'])}: a difference within {pct(THRESHOLD)} or with the ranges "
            "overlapping is this run's noise (the rule of every comparison on this site).")
    pings = [c.get(*goal.top[:2], "vs_ping_held"), c.get(*goal.bottom[:2], "vs_ping_held")]
    if None not in pings:
        text += (f" Against the PINGs measured in each case, which move with the machine, the ratio is "
                 f"{times(pings[0] / pings[1])} ({fmt(pings[0])} against {fmt(pings[1])} of a held PING).")
    return text


def _why(goal: Goal, c: Cells, found: dict[str, Any]) -> str:
    if found["noise"]:
        return _noise(goal, c, found)
    if goal.top[2] == "p99_ms":
        return _p99_why(c)
    if goal.top[2] == "vs_ping_held":
        return _ping_why(c, goal.top[1])
    if goal.top[2] == "vs_ping_client":
        return _client_ping_why(c, goal.top[1])
    cpu = [c.get(*goal.top[:2], "client_cpu_us_per_job"), c.get(*goal.bottom[:2], "client_cpu_us_per_job")]
    return "" if None in cpu else f"The producer's CPU per job: {fmt(cpu[0])} µs against {fmt(cpu[1])} µs."


def _verdict(goal: Goal, found: dict[str, Any] | None) -> str:
    if found is None:
        return "not measured in this run"
    if found["ratio"] >= goal.bound if goal.at_least else found["ratio"] <= goal.bound:
        # the median meets it; within the noise with a whisker past the bound, so might a miss
        worst = found.get("lo" if goal.at_least else "hi")
        past = worst is not None and (worst < goal.bound if goal.at_least else worst > goal.bound)
        return "met, within the noise" if found["noise"] and past else "met"
    return "not met, within the noise" if found["noise"] else "**not met**"


def batching_goals(ds: Dataset, prefix: str = "") -> str:
    """Each goal: the ratio from the run, the bound, met or not, and why not."""
    found = sweep_run(ds)
    if found is None:
        return no_data(NEEDS)
    run, server = found
    cells = Cells(select(ds.summary, run_id=run, scenario=SCENARIO, server=server, **BASELINE))
    table: list[dict[str, Any]] = []
    notes: list[str] = []
    for goal in GOALS:
        found = cells.compared(goal)
        verdict = _verdict(goal, found)
        bound = f"{'at least' if goal.at_least else 'at most'} {times(goal.bound)}"
        measured = times_beside(found["ratio"], goal.bound) if found else "—"
        table.append({"goal": goal.name, "bound": bound, "measured": measured, "verdict": verdict})
        if found and verdict != "met" and (why := _why(goal, cells, found)):
            notes.append(f"**{goal.name}: {verdict.strip('*')}** ({measured}, {bound}). {why}")
    return "\n\n".join([f"{server_label(ds, run, server)}, medians of the repetitions; each ratio compares "
                        "cases of the same run.", md_table(pd.DataFrame(table)), *notes,
                        source(ds, run, prefix)])


SECTIONS = {"batching_goals": batching_goals}
