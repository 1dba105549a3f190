"""Methodology page: the result files, what each is used for, environments and commands."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pandas as pd

from bench.report.batching import sweep_run
from bench.report.common import primary_run
from bench.report.compare import same_method_runs
from bench.report.ha import newest
from bench.report.load import Dataset
from bench.report.peers import peers_run
from bench.report.points import COMPARED
from bench.report.runtimes import install_sizes, ratios
from bench.report.servers import dragonfly_runs, flags, yardsticks
from bench.report.text import (
    DIRTY_WORDS,
    admonition,
    commit_note,
    fmt,
    md_table,
    no_data,
    uncommitted_kind,
    wrapped,
)
from bench.report.tuning import AOF_SCENARIOS, prefetch_run

MAIN_SCENARIO = "process"
# The scenarios whose verdicts other runs of the baseline's method check (Servers, Tuning).
VERDICT_SCENARIOS = {p.scenario for p in COMPARED} | set(AOF_SCENARIOS)


# Where a scenario's figures are shown when a run other than the baseline is its newest full one
# (failover has its own High availability entry).
SHOWN = {"enqueue-single": "Performance: one job per call, its PING table and client CPU rows"}


@dataclass(frozen=True)
class Picks:
    """Which run each section reads, found once per page (the Runtimes pairing alone takes a
    second, and every run's row asks)."""

    main: str | None
    moved: dict[str, str]  # scenario -> the run its sections show, where not the baseline
    readers: dict[str, list[str]]  # run -> the sections other than the baseline's that read it
    dragonfly: list[str]
    spread: list[str]  # full runs of the baseline's method, machine and interpreter

    @property
    def elsewhere(self) -> list[str]:
        """The runs that feed a section the baseline feeds on other pages, each once."""
        return list(dict.fromkeys(self.moved.values()))


def picks(ds: Dataset) -> Picks:
    """What the site reads each run for."""
    main = primary_run(ds, MAIN_SCENARIO)
    found = {s: primary_run(ds, s) for s in sorted(set(ds.summary.scenario)) if s != "failover"}
    moved = {s: r for s, r in found.items() if r is not None and r != main}
    readers: dict[str, list[str]] = {}
    for scenario, run in moved.items():
        readers.setdefault(run, []).append(SHOWN.get(scenario, f"the `{scenario}` figures"))
    peers, sweep = peers_run(ds), sweep_run(ds)
    if peers is not None:
        readers.setdefault(str(peers.name), []).append("Peers, and its ratios on Home")
    if sweep is not None:
        readers.setdefault(sweep[0], []).append("Tuning: the goals for batching")
    prefetch = prefetch_run(ds)
    if prefetch is not None and prefetch != main:
        readers.setdefault(prefetch, []).append("Tuning: prefetch")
    # an option's own run, and the default-runtime runs the Runtimes page pairs options with; a
    # run it no longer pairs (a newer one replaced it) may still be where a driver's size is read
    paired = {r for per in ratios(ds).values() for v in per.values() for r in (v["run"], *v["base"])}
    sized = {run for _, run in install_sizes(ds).values()}
    for run in ds.runs.index:
        if run != main and run in paired:
            readers.setdefault(run, []).append("Runtimes and drivers")
        elif run != main and run in sized:
            readers.setdefault(run, []).append("Runtimes and drivers: the install sizes only")
    for run in {r for d in dragonfly_runs(ds) for r in yardsticks(ds, d)}:
        readers.setdefault(run, []).append("Servers: the yardstick of the Dragonfly run's host speed")
    failover = newest(ds, "failover")[0]
    if failover is not None:
        readers.setdefault(failover, []).append("High availability: failover")
    # a run of the method that measured none of the verdicts' scenarios (failover alone) checks none
    held = ds.summary[ds.summary.scenario.isin(VERDICT_SCENARIOS)].run_id
    spread = [r for r in same_method_runs(ds, main) if r == main or held.eq(r).any()] if main else []
    return Picks(main, moved, readers, dragonfly_runs(ds), spread)


def role(ds: Dataset, run: str, found: Picks) -> str:
    """What the site uses a run for, in words: the baseline, or each section that picks it."""
    if run == found.main:
        return ("the baseline: the figures of every section that no other row names" if found.moved
                else "the figures on every page")
    if run in found.dragonfly:
        return "Dragonfly, as ratios to its own Valkey 9.1"
    if ds.runs.loc[run].quick:
        return "nothing (quick run)"
    if run in found.readers:
        return "; ".join(found.readers[run])
    if run in found.spread:
        return "run-to-run spread only: an older run of the same method, machine and interpreter"
    doc = ds.runs.loc[run].doc
    if doc.get("peers") and not doc["results"]:  # History reads the results rows alone
        return "nothing now: a peers run that a newer one replaced (Peers reads the newest)"
    return "History only: an older run, another method or another machine"


def baseline_note(ds: Dataset, found: Picks) -> str:
    """Which run the pages show, when, how and on what it was measured, in one paragraph."""
    main = found.main
    if main is None:
        return ""
    run, method = ds.runs.loc[main], ds.runs.loc[main].doc["method"]
    servers = [e["id"] for e in run.doc["servers"] if e["measured"]]
    fresh = method.get("process_per_case") and method.get("flush_per_case")
    others = len(found.spread) - 1
    elsewhere = "; ".join(f"{'; '.join(found.readers[r])} (run `{r}`)" for r in found.elsewhere)
    also = f"; here also {elsewhere}" if elsewhere else ""
    return (f"**The baseline.** The pages' figures come from run `{main}` (a section that reads another "
            f"run, such as Dragonfly, peers, runtimes or history, names it{also}), measured on "
            f"{run.created[:10]} "
            f"{commit_note(run.commit)} on {len(servers)} servers ({', '.join(servers)}), "
            f"{method['repetitions']} repetitions after {method['warmup']} warm-up, "
            + ("with the current method (a fresh process and a flush for every case of every "
               "repetition). " if fresh else "with an older method (a process per repetition). ")
            + (f"{others} other full run{'s' if others != 1 else ''} of that method on that machine "
               f"{'feed' if others != 1 else 'feeds'} the run-to-run checks of the verdicts." if others else
               "No other full run of that method on that machine exists yet, so each verdict rests on "
               "this run alone.") + "\n\n")


def runs_section(ds: Dataset, prefix: str = "") -> str:
    """Every result file, newest first, with what the site uses it for."""
    if ds.empty:
        return no_data("any run")
    found = picks(ds)
    table = pd.DataFrame([{
        "run (raw JSON)": f"[`{r.run_id}`]({prefix}{r.url})", "created (UTC)": r.created[:16],
        "commit": f"`{r.commit[:7]}`" + DIRTY_WORDS[uncommitted_kind(r.doc.get("git") or {})[0]],
        "servers": len([e for e in r.doc["servers"] if e["measured"]]),
        "used for": role(ds, r.run_id, found)} for r in ds.runs.iloc[::-1].itertuples()])
    return baseline_note(ds, found) + md_table(table) + "\n"


def environment(run: pd.Series) -> str:
    """Where and how one run was measured, as a list (long values wrap)."""
    env, method = run.doc["environment"], run.doc["method"]
    clients = ", ".join(f"{k} {v}" for k, v in sorted(run.doc["clients"].items()) if v)
    items = [("machine", f"{env['machine_label']}: {env['cpu_model']}, {env['cores']} cores, "
                         f"{fmt((env.get('memory_bytes') or 0) / 2**30)} GiB"),
             ("OS", f"{env['os']} {env['kernel']}"),
             ("Python", f"{env['implementation']} {env['python']}; {clients}"),
             ("measured", commit_note(run.commit)),
             ("method", f"{method['repetitions']} repetitions, {method['warmup']} warm-up, "
                        f"a process per {'case' if method.get('process_per_case') else 'repetition'}"
                        f", flush per {'case' if method.get('flush_per_case') else 'repetition'}"
                        + (f"; order: {method['case_order']}" if method.get("case_order") else ""))]
    lines = [f"- **{k}**: {v}" for k, v in items]
    for entry in (e for e in run.doc["servers"] if e["measured"]):
        for config in entry["configs"]:
            shown = flags(entry, config) or "not applicable"
            lines.append(f"- **{entry['id']}** `{config}`: `{shown}`")
    return "\n".join(lines)


def environments_section(ds: Dataset, prefix: str = "") -> str:
    """One collapsible block per result file."""
    if ds.empty:
        return no_data("any run")
    found = picks(ds)
    return "\n".join(admonition("abstract", f"Run {run.run_id} ({role(ds, run.run_id, found)})",
                                environment(run) + f"\n\n[Raw JSON]({prefix}{run.url})", "???")
                     for _, run in ds.runs.iloc[::-1].iterrows())


def commands_section(ds: Dataset, prefix: str = "") -> str:
    """The exact command behind each result file, wrapped to fit the page."""
    if ds.empty:
        return ""
    lines = [f"# {run.run_id}\n{shlex.join(run.doc['command'])}"
             for run in ds.runs.iloc[::-1].itertuples()]
    return ("The exact command of each result file:\n\n" + wrapped("\n".join(lines)) + "\n")


SECTIONS = {"runs_section": runs_section, "environments_section": environments_section,
            "commands_section": commands_section}
