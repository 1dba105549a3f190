"""Tuning page, prefetch: the process scenario's prefetch case against the plain drain of the same
concurrency in the same run, per server; the verdict is computed from the ratios and the noise rule,
and no figure of the prefetch case reaches a table of the default worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from docs_synthetic import BASE, load_docs, make_run, metric, render, row

from bench.report.tuning import _prefetch_verdict, prefetch_run

PLAIN_CPU = 20.0


def _with_prefetch(gains: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """A synthetic run whose process scenario has, on each server of ``gains``, a plain drain at
    concurrency 32 (rate BASE * 1.9, CPU 20 µs per job) and the prefetch case at ``(rate factor,
    CPU factor)`` of it."""
    doc = make_run()
    for server, (rate, cpu) in gains.items():
        doc["results"] = [r for r in doc["results"] if not (
            r["server"] == server and r["scenario"] == "process" and r["params"].get("concurrency") == 32
            and not {"result_bytes", "features"} & set(r["params"]))]
        params = {"jobs": 500, "concurrency": 32, "payload_bytes": 64}
        doc["results"].append(row("process", params, {
            "jobs_per_s": metric(BASE * 1.9, "1/s"), "client_cpu_us_per_job": metric(PLAIN_CPU, "us")},
            server=server))
        doc["results"].append(row("process", {**params, "prefetch": 32}, {
            "jobs_per_s_prefetch": metric(BASE * 1.9 * rate, "1/s"),
            "client_cpu_us_per_job_prefetch": metric(PLAIN_CPU * cpu, "us")}, server=server))
    return doc


def test_each_server_gets_its_ratio_and_a_split_run_recommends_nothing(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, _with_prefetch({"valkey-9.1": (1.4, 0.8), "redis-7.0": (1.01, 1.0)}))
    out = render(ds, "prefetch_section")
    assert "valkey-9.1" in out and "redis-7.0" in out
    assert "1.40x" in out and "1.25x" in out  # jobs/s 1.4; CPU 20 -> 16 µs, lower is better
    assert "noise" in out  # redis-7.0's 1.01x
    assert "raised the rate beyond the noise on 1 of 2 servers (1.40x)" in out
    assert "cut the worker's CPU per job beyond the noise on 1 of 2 servers (1.25x)" in out
    assert "set `prefetch`" not in out


def test_a_gain_on_every_server_recommends_prefetch_for_short_jobs(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, _with_prefetch({"valkey-9.1": (1.4, 0.8), "redis-7.0": (1.3, 0.85)}))
    out = render(ds, "prefetch_section")
    assert "raised the rate beyond the noise on 2 of 2 servers (1.30x to 1.40x)" in out
    assert "set `prefetch` to the worker's concurrency" in out


def test_prefetch_figures_stay_out_of_the_default_workers_tables(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, _with_prefetch({"valkey-9.1": (3.0, 0.5)}))
    prefetch_rate = f"{BASE * 1.9 * 3.0:,.0f}"
    assert prefetch_rate in render(ds, "prefetch_section")
    for section in ("process_section", "client_cpu_section", "headline"):
        assert prefetch_rate not in render(ds, section), section


def test_a_run_without_the_case_says_so(tmp_path: Path) -> None:
    doc = make_run()
    doc["results"] = [r for r in doc["results"] if "prefetch" not in r["params"]]
    assert "No results yet" in render(load_docs(tmp_path, doc), "prefetch_section")


def test_a_run_without_the_cpu_figures_shows_the_rates_alone(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path, make_run()), "prefetch_section")
    assert "1.30x" in out and "worker's CPU" not in out.split("|")[-1]



def test_the_section_reads_the_run_that_has_the_case(tmp_path: Path) -> None:
    """A newer complete run without the prefetch case leaves the section on the run with it, and the
    methodology table says what that run is read for."""
    older = _with_prefetch({"valkey-9.1": (1.4, 0.8)})
    older.update(run_id="20261128T090000Z-feed01", created_utc="2026-11-28T09:00:00Z")
    newer = make_run()
    newer["results"] = [r for r in newer["results"] if "prefetch" not in r["params"]]
    ds = load_docs(tmp_path, older, newer)
    assert prefetch_run(ds) == older["run_id"]
    assert older["run_id"] in render(ds, "prefetch_section")
    runs = render(ds, "runs_section")
    assert "Tuning: prefetch" in runs.split(older["run_id"], 2)[-1].splitlines()[0]


def test_no_rate_pair_recommends_nothing() -> None:
    """The verdict recommended prefetch when every rate pair beat the noise: with no rate pair at
    all (only the CPU figures compared), 'all of none' held and it recommended it."""
    cpu_only = pd.DataFrame({"metric": ["client_cpu_us_per_job"], "ratio": [1.4], "noise": [False]})
    said = _prefetch_verdict(cpu_only, 2)
    assert "set `prefetch`" not in said and "recommends no setting" in said
