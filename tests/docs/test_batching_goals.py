"""The Tuning page's batching goals: ratios of one run's enqueue-single cases, met or not, and why."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from docs_synthetic import load_docs as dataset
from docs_synthetic import make_run, metric, render, row

# (callers, batching): jobs/s, p50 ms, p99 ms, producer CPU µs per job
SWEEP = {(1, False): (8000, 0.12, 0.20, 60.0), (1, True): (8400, 0.11, 0.19, 55.0),
         (32, True): (64000, 0.48, 0.90, 10.0), (128, True): (90000, 1.4, 2.1, 7.0)}


def sweep_rows(costs: bool = True, held_ping: float = 11000.0) -> list[dict[str, Any]]:
    rows = []
    for (callers, batching), (rate, p50, p99, cpu) in SWEEP.items():
        metrics = {"jobs_per_s": metric(rate, "1/s"), "p50_ms": metric(p50, "ms"),
                   "p99_ms": metric(p99, "ms"), "client_cpu_us_per_job": metric(cpu, "us")}
        if callers == 1:
            metrics |= {"ping_held_ops_per_s": metric(held_ping, "1/s"),
                        "vs_ping_held": metric(rate / held_ping, "ratio"),
                        "ping_client_ops_per_s": metric(9600.0, "1/s"),
                        "vs_ping_client": metric(rate / 9600.0, "ratio")}
            if costs:
                metrics |= {"server_script_us_per_call": metric(12.0, "us"),
                            "ping_held_client_cpu_us": metric(42.0, "us")}
        rows.append(row("enqueue-single", {"payload_bytes": 64, "callers": callers, "batching": batching},
                        metrics))
    return rows


def sweep_run(run_id: str = "20261201T101500Z-bb0001", created: str = "2026-12-01T10:15:00Z",
              python: str = "3.11.7", **method: Any) -> dict[str, Any]:
    doc = copy.deepcopy(make_run(run_id=run_id, created=created))
    doc["results"] = sweep_rows()
    doc["environment"]["python"] = python
    doc["method"].update(method)
    return doc


def goal_line(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"| {start}"))


def note_of(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"**{start}"))


HELD_ON = "one caller, batching on (the default): enqueue ÷ a held"


def test_no_sweep_says_so(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run()), "batching_goals")
    assert "No results yet" in out and "enqueue-single" in out


def test_each_goal_is_a_ratio_of_the_runs_cases_with_its_verdict(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, make_run(), sweep_run()), "batching_goals")
    assert "| 8.00x " in goal_line(out, "32 callers, batching on: jobs/s") and "| met " in out
    assert "| 4.50x " in goal_line(out, "32 callers, batching on: p99")  # 0.90 / 0.20
    assert "**not met**" in goal_line(out, "32 callers, batching on: p99")
    lone = goal_line(out, "one caller: jobs/s")
    assert "| 1.05x " in lone and "| met " in lone
    # 8,400 / 11,000 held PINGs: not met; the run named is the sweep's, not the full run's
    assert "| 0.76x " in goal_line(out, HELD_ON)
    assert "bb0001" in out


def test_the_p99_goal_says_what_littles_law_requires(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, sweep_run()), "batching_goals")
    note = next(line for line in out.splitlines() if line.startswith("**32 callers, batching on: p99"))
    # mean per call = 32 / 64,000 jobs/s = 0.5 ms; 2x the lone p99 (0.4 ms) needs 32 / 0.4 ms = 80,000 jobs/s
    assert "0.500 ms" in note and "0.400 ms" in note and "80,000 jobs/s" in note
    assert "64% of one core" in note  # 10 µs x 64,000 jobs/s
    assert "With 128 callers" in note and "90,000 jobs/s" in note


def test_the_ping_goal_splits_the_difference_and_bounds_the_ratio(tmp_path: Path) -> None:
    out = render(dataset(tmp_path, sweep_run()), "batching_goals")
    note = note_of(out, HELD_ON)
    # PING 90.9 µs, enqueue 119 µs: 28.1 more = 12 script + 13 CPU (55 - 42) + 3.14 remain
    assert "90.9 µs per round trip" in note and "it took 119 µs, 28.1 µs more" in note
    assert "script for 12 µs" in note and "13 µs more CPU" in note and "3.14 µs remain" in note
    assert "would leave 0.86x" in note  # 90.9 / (90.9 + 12 + 3.14)
    off = note_of(out, "one caller, batching off: enqueue ÷ a held")
    assert "60 against 42 µs" in off  # its own case's figures


def test_the_client_ping_goal_is_the_enqueue_rate_over_client_ping_in_its_own_case(tmp_path: Path) -> None:
    """The goal's 0.85x was set against client.ping() one at a time (the reference scenario's
    ping_c1 of the run the issue quoted); the held PING, a lower floor, had the only rows."""
    out = render(dataset(tmp_path, sweep_run()), "batching_goals")
    off = goal_line(out, "one caller, batching off: enqueue ÷ client.ping()")
    assert "| 0.83x " in off and "**not met**" in off  # 8,000 / 9,600
    on = goal_line(out, "one caller, batching on (the default): enqueue ÷ client.ping()")
    assert "| 0.88x " in on and "| met " in on  # 8,400 / 9,600
    note = note_of(out, "one caller, batching off: enqueue ÷ client")
    assert "104 µs per call, so 0.85x allows an enqueue 123 µs; it took 125 µs" in note  # 1e6 / 9,600
    # a run from before client.ping() was recorded in the case says so, no figure
    doc = sweep_run()
    for result in doc["results"]:
        result["metrics"].pop("vs_ping_client", None)
    old = render(dataset(tmp_path / "old", doc), "batching_goals")
    assert "not measured in this run" in goal_line(old, "one caller, batching off: enqueue ÷ client.ping()")


def test_the_ping_goal_sets_a_plain_write_beside_it_where_measured(tmp_path: Path) -> None:
    doc = sweep_run()
    for result in doc["results"]:
        if result["params"]["callers"] == 1:
            result["metrics"]["set_held_vs_ping_held"] = metric(0.84, "ratio")
    out = render(dataset(tmp_path, doc), "batching_goals")
    note = note_of(out, HELD_ON)
    assert "ran at 0.84x the held PINGs' rate in the same case, below the goal's 0.85x" in note
    # a run from before the SET was measured says nothing of it
    assert "plain write" not in render(dataset(tmp_path / "old", sweep_run()), "batching_goals")


def test_a_run_without_the_cost_figures_says_they_were_not_recorded(tmp_path: Path) -> None:
    doc = sweep_run()
    doc["results"] = sweep_rows(costs=False)
    out = render(dataset(tmp_path, doc), "batching_goals")
    assert "was not recorded in this run" in out and "script for" not in out


def test_a_run_on_another_runtime_never_replaces_the_default_runtimes_sweep(tmp_path: Path) -> None:
    newer = [sweep_run("20261202T101500Z-bb0002", "2026-12-02T10:15:00Z", python="3.13.1"),
             sweep_run("20261202T111500Z-bb0003", "2026-12-02T11:15:00Z", driver="glide")]
    for doc in newer:
        for r in doc["results"]:
            r["metrics"]["jobs_per_s"] = metric(r["metrics"]["jobs_per_s"]["median"] * 2, "1/s")
    out = render(dataset(tmp_path, sweep_run(), *newer), "batching_goals")
    assert "bb0001" in out and "bb0002" not in out and "bb0003" not in out
    assert "| 8.00x " in goal_line(out, "32 callers, batching on: jobs/s")


def test_a_missed_bound_inside_the_repetitions_range_is_called_noise(tmp_path: Path) -> None:
    doc = sweep_run()
    lone_on = next(r for r in doc["results"] if r["params"]["callers"] == 1 and r["params"]["batching"])
    # 7,700 ± 5% against 8,000 ± 2%: 0.96x, within 10% and the ranges overlap (7,315-8,085 and
    # 7,840-8,160): whiskers 7,315 / 8,160 = 0.90 to 8,085 / 7,840 = 1.03
    lone_on["metrics"]["jobs_per_s"] = metric(7700, "1/s", spread=0.05)
    lone_on["metrics"]["vs_ping_held"] = metric(0.74, "ratio")
    out = render(dataset(tmp_path, doc), "batching_goals")
    lone = goal_line(out, "one caller: jobs/s")
    assert "| 0.96x " in lone and "within the noise" in lone
    note = next(line for line in out.splitlines() if line.startswith("**one caller: jobs/s"))
    assert "the ratio runs 0.90\u20131.03" in note  # an en dash
    assert "1.02x (0.740 against 0.727 of a held PING)" in note  # 8,000 / 11,000 = 0.727
    # beyond 10% with the ranges apart (6,860-7,140 against 7,840-8,160): a plain miss
    lone_on["metrics"]["jobs_per_s"] = metric(7000, "1/s")
    out = render(dataset(tmp_path / "apart", doc), "batching_goals")
    assert "| **not met** " in goal_line(out, "one caller: jobs/s")


def test_the_goals_come_from_the_run_the_performance_page_shows_not_a_newer_smaller_one(
        tmp_path: Path) -> None:
    # the full run (two servers) measured the sweep; a later one-server run (a Runtimes session's
    # baseline) measured it again, slower: the Tuning page showed the later run's ratios while the
    # Performance page, which links to it for them, showed the full run's
    full = sweep_run()
    later = sweep_run("20261202T101500Z-bb0002", "2026-12-02T10:15:00Z")
    later["servers"] = [s for s in later["servers"] if s["id"] == "valkey-9.1"]
    for r in later["results"]:
        r["metrics"]["jobs_per_s"] = metric(r["metrics"]["jobs_per_s"]["median"] / 2, "1/s")
    ds = dataset(tmp_path, full, later)
    assert "bb0001" in render(ds, "enqueue_section")
    out = render(ds, "batching_goals")
    assert "bb0001" in out and "bb0002" not in out


def test_a_bound_met_by_the_median_alone_is_not_called_met_outright(tmp_path: Path) -> None:
    """Run 3fccf3: batching on ÷ off at one caller, 0.99x against a bound of at least 0.97x, was
    'met', while its repetitions ran 0.94x to 1.04x: a verdict inside the noise stated as a fact,
    where a miss inside the noise is already 'not met, within the noise'."""
    doc = sweep_run()
    lone_on = next(r for r in doc["results"] if r["params"]["callers"] == 1 and r["params"]["batching"])
    # 7,950 ± 5% against 8,000 ± 2%: 0.99x, whiskers 7,552 / 8,160 = 0.93 to 8,348 / 7,840 = 1.06
    lone_on["metrics"]["jobs_per_s"] = metric(7950, "1/s", spread=0.05)
    out = render(dataset(tmp_path, doc), "batching_goals")
    lone = goal_line(out, "one caller: jobs/s")
    assert "| 0.99x " in lone and "| met, within the noise " in lone
    note = next(line for line in out.splitlines() if line.startswith("**one caller: jobs/s"))
    assert "the ratio runs 0.93\u20131.06" in note
    # whiskers above the bound (the synthetic sweep: 1.01 to 1.09): met outright
    assert "| met " in goal_line(render(dataset(tmp_path / "clear", sweep_run()), "batching_goals"),
                                 "one caller: jobs/s")


def test_a_ratio_that_rounds_onto_the_bound_shows_the_digit_that_decides(tmp_path: Path) -> None:
    """Run dc1019: batching on ÷ off at one caller read "0.97x", against "at least 0.97x", and
    "not met, within the noise" (the ratio was below 0.97 in its third digit)."""
    doc = sweep_run()
    lone_on = next(r for r in doc["results"] if r["params"]["callers"] == 1 and r["params"]["batching"])
    lone_on["metrics"]["jobs_per_s"] = metric(7730, "1/s", spread=0.05)  # 7,730 / 8,000 = 0.966
    lone = goal_line(render(dataset(tmp_path, doc), "batching_goals"), "one caller: jobs/s")
    assert "| 0.966x " in lone and "| not met, within the noise " in lone
    assert "0.97x " not in lone.split("|")[3]  # the measured column
    # two decimals suffice where they differ from the bound's
    lone_on["metrics"]["jobs_per_s"] = metric(7650, "1/s", spread=0.05)  # 0.956
    assert "| 0.96x " in goal_line(render(dataset(tmp_path / "b", doc), "batching_goals"),
                                   "one caller: jobs/s")
