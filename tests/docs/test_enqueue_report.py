"""Unit tests of the report layer's producer and per-job cost sections: enqueue (one job per call,
batches, the PING and call ceilings), client CPU per job, exactly-once accounting.

Result documents come from docs_synthetic (schema-valid, built in memory); nothing is read from
results/, and no mkdocs is needed.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
from docs_synthetic import chart_specs, load_docs, make_run, metric, render

from bench.report import common


def test_enqueue_labels_producers_and_keeps_single_and_bulk_apart(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run())
    out = render(ds, "enqueue_section")
    bulk = chart_specs(out)[1]
    assert sorted(t["name"] for t in bulk["data"]) == ["1 producer", "4 producers"]
    assert len(chart_specs(out)) == 2


def test_one_job_per_call_labels_callers_and_batching_apart_from_variants(tmp_path: Path) -> None:
    doc = make_run()
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for callers, batching in ((1, True), (32, False), (32, True)):
        doc["results"].append({**copy.deepcopy(single), "params": {**single["params"], "callers": callers,
                                                                   "batching": batching}})
    doc["results"].append({**copy.deepcopy(single), "protocol": 2})
    out = render(load_docs(tmp_path, doc), "enqueue_section")
    sweep, lone = chart_specs(out)[:2]
    assert {t["name"]: t["x"] for t in sweep["data"]} == {"batching off": [1, 32], "batching on": [1, 32]}
    assert [t["x"] for t in lone["data"]] == [["baseline", "RESP2"]]
    rows = [line.split("|")[1:4] for line in out.splitlines() if line.startswith(("| baseline", "| RESP2"))]
    labels = [tuple(cell.strip() for cell in row) for row in rows]
    assert len(set(labels)) == len(labels) == 5 + 2  # 4 single cases + RESP2, 2 bulk rows
    assert "callers 1" not in out and "batching False" not in out


def test_lone_enqueue_is_shown_against_the_pings_of_its_own_case_per_server(tmp_path: Path) -> None:
    doc = make_run()
    assert "enqueue ÷" not in render(load_docs(tmp_path / "old", doc), "enqueue_section")  # not measured
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for server, batching in (("redis-7.0", False), ("valkey-9.1", True)):
        doc["results"].append({**copy.deepcopy(single), "server": server,
                               "params": {**single["params"], "batching": batching}})
    for row in [r for r in doc["results"] if r["scenario"] == "enqueue-single"]:
        rate = row["metrics"]["jobs_per_s"]["median"]
        row["metrics"] |= {"ping_client_ops_per_s": metric(5000, "1/s"),
                           "vs_ping_client": metric(rate / 5000, "ratio"),
                           "ping_held_ops_per_s": metric(8000, "1/s"),
                           "vs_ping_held": metric(rate / 8000, "ratio"),
                           "set_held_ops_per_s": metric(6800, "1/s"),
                           "set_held_vs_ping_held": metric(0.85, "ratio")}
    out = render(load_docs(tmp_path / "new", doc), "enqueue_section")
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if "enqueue ÷ client.ping()" in line))
    ratios = lines[header + 2:header + 5]  # the ratios table, then the rates behind them
    assert [line.split("|")[1].strip() for line in ratios] == ["valkey-9.1", "valkey-9.1", "redis-7.0"]
    assert "| off " in ratios[0] and "| on " in ratios[1]
    assert "enqueue ÷ PING held" in lines[header]
    assert "0.600" in ratios[0] and "0.375" in ratios[0]  # 3,000 jobs/s over 5,000 and 8,000 PINGs/s
    assert "SET held ÷ PING held" in lines[header] and "0.850" in ratios[0]  # one plain write
    rates = next(line for line in lines if "client.ping() (calls/s)" in line)
    assert "PING, held (calls/s)" in rates and "enqueue (jobs/s)" in rates and "SET, held (calls/s)" in rates


def test_bulk_takeaway_compares_one_producer_with_one_producer(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run())
    out = render(ds, "performance_takeaways")
    # single 3,000 jobs/s; bulk 30,000 with 1 producer and 42,000 with 4: like for like is 10x
    assert "gives 10.0x the jobs/s" in out and "14.0x" not in out


def test_bulk_takeaway_is_against_one_caller_without_batching_only(tmp_path: Path) -> None:
    doc = make_run()
    single = next(r for r in doc["results"] if r["scenario"] == "enqueue-single")
    single["params"].update(callers=1, batching=False)
    for callers, batching, k in ((1, True, 1.5), (8, False, 2.0), (8, True, 5.0)):  # not like for like
        params = {**single["params"], "callers": callers, "batching": batching}
        rates = {"jobs_per_s": metric(3000 * k, "1/s")}
        doc["results"].append({**single, "params": params, "metrics": rates})
    out = render(load_docs(tmp_path, doc), "performance_takeaways")
    assert out.count("enqueueing in batches") == 1 and "gives 10.0x the jobs/s" in out


def test_concurrency_takeaway_reads_as_a_sentence(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path, make_run()), "performance_takeaways")
    assert "With 64 B payloads, 8 concurrent tasks complete" in out
    assert "gives 90% of the throughput of concurrency" not in out


def test_exactly_once_accounting_is_shown_per_row(tmp_path: Path) -> None:
    doc = make_run()
    bad = next(r for r in doc["results"] if r["scenario"] == "process"
               and r["config"] == "default" and r["params"]["concurrency"] == 32)
    bad["exactly_once"] = {"enqueued": 12, "acked": 12, "duplicates": 0, "lost": 0, "ok": True}
    out = render(load_docs(tmp_path, doc), "process_section")
    assert "| 12 \N{CHECK MARK}" in out and "| 10 \N{CHECK MARK}" in out
    case = pd.Series({"enqueued": 10, "acked": 9, "lost": 1, "duplicates": 0})
    assert common.exactly_once(case) == "9/10 acked, 1 lost, 0 dup."


def test_client_cpu_per_job_is_not_measured_yet_in_files_without_it(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path, make_run()), "client_cpu_section")
    assert "No results yet" in out and "client_cpu_us_per_job" in out
    assert "|" not in out  # no table, no figure typed in


def test_client_cpu_per_job_is_shown_beside_the_rate_of_the_same_case(tmp_path: Path) -> None:
    doc = make_run()
    cpu = {("enqueue-single", 1): 80.0, ("enqueue-bulk", 1): 8.0, ("enqueue-bulk", 4): 12.5,
           ("process", 32): 20.0}
    for row in doc["results"]:
        params = row["params"]
        key = (row["scenario"], params.get("producers", params.get("concurrency", 1)))
        if row["config"] == "default" and row["protocol"] == 3 and row["parser"] == "hiredis" \
                and key in cpu:
            row["metrics"]["client_cpu_us_per_job"] = metric(cpu[key], "us", spread=0.0)
    out = render(load_docs(tmp_path, doc), "client_cpu_section")
    assert "No results yet" not in out
    lines = {line.split("|")[2].strip(): line for line in out.splitlines() if line.count("|") > 4}
    assert "| 80 " in lines["default"] and "12,500" in lines["default"]  # 1e6 / 80 µs; no params
    assert "| 12.5 " in lines["batch 50, producers 4"] and "80,000" in lines["batch 50, producers 4"]
    assert "| 20 " in lines["concurrency 32"] and "50,000" in lines["concurrency 32"]
    assert "concurrency 1 " not in out  # rows without the metric are not shown
    assert "20261129T201500Z-ab12cd" in out  # the source run is named


def test_the_rate_one_client_core_could_sustain_carries_the_spread_of_the_cpu_it_comes_from(
        tmp_path: Path) -> None:
    # 1e6 / (78.4, 80, 81.6 µs): it was shown as a bare 12,500, five digits from a figure known to ±2%
    doc = make_run()
    for row in doc["results"]:
        if row["scenario"] == "process" and row["config"] == "default" and row["protocol"] == 3 \
                and row["parser"] == "hiredis" and row["params"].get("concurrency") == 32:
            row["metrics"]["client_cpu_us_per_job"] = metric(80.0, "us")
    out = render(load_docs(tmp_path, doc), "client_cpu_section")
    line = next(line for line in out.splitlines() if "concurrency 32" in line)
    assert "| 12,500 (12,300\u201312,800) " in line  # 3 digits


def test_the_call_ceiling_table_shows_each_figure_with_its_spread_and_the_ratio_with_whiskers(
        tmp_path: Path) -> None:
    # process c32 1,900 jobs/s (1,862-1,938) over EVALSHA at 32 callers 16,000 calls/s
    # (15,680-16,320): it showed bare medians and "0.12x" under "jobs per call ceiling"
    out = render(load_docs(tmp_path, make_run()), "ceiling_section")
    line = next(line for line in out.splitlines() if line.startswith("| valkey-9.1"))
    assert "1,900 (1,862\u20131,938)" in line and "16,000 (15,680\u201316,320)" in line
    assert "0.12x (0.11\u20130.12)" in line and "jobs/s \u00f7 EVALSHA calls/s" in out


def test_a_ping_p99_of_few_samples_is_marked_as_the_slowest_sample(tmp_path: Path) -> None:
    """A batch of 1000 left 11 PINGs per sweep: their "p99" is the slowest, shown as a percentile."""
    doc = make_run()
    for r in doc["results"]:
        if r["scenario"] == "maintenance":
            r["extra"] = {"probe_samples": 11 if r["params"]["batch"] == 1000 else 250}
    out = render(load_docs(tmp_path, doc), "maintenance_section")
    marked = [line for line in out.splitlines() if line.startswith("| 1000 ") and "†" in line]
    assert len(marked) == 1 and "| 1000 | 1000 | 11 |" in " ".join(marked[0].split())
    assert "† Fewer than 100 PING samples (as few as 11)" in out
    assert out.count("†") == 2  # the one cell and its note


def test_enqueue_parts_from_two_runs_each_name_their_own_run(tmp_path: Path) -> None:
    """A newer enqueue-single run (made alone, here on another machine) feeds the one-job-per-call
    part while enqueue-bulk still comes from the full run: the section named only the last part's
    run, so the newer run's figures were attributed to the older run and its machine."""
    older = make_run()
    newer = make_run(run_id="20261206T170300Z-cd34ef", created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "enqueue-single"]
    newer["environment"]["cpu_model"] = "AMD EPYC"
    out = render(load_docs(tmp_path, older, newer), "enqueue_section")
    single, bulk = out.split("### In batches")
    assert "20261206T170300Z-cd34ef" in single and "AMD EPYC" in single
    # the ceilings note names ab12cd; the source line must not
    sources = [line for line in single.splitlines() if "Source: run" in line]
    assert sources and not any("ab12cd" in line for line in sources)
    assert "20261129T201500Z-ab12cd" in bulk and "cd34ef" not in bulk
    # one run behind both parts: one source line
    assert render(load_docs(tmp_path / "one", older), "enqueue_section").count("Source: run") == 1


def test_client_cpu_rows_from_two_runs_say_which_run_each_came_from(tmp_path: Path) -> None:
    """One table held the enqueue rows of a newer enqueue-single run (another machine) and the
    process rows of the full run, with nothing telling which row came from which."""
    older = make_run()
    newer = make_run(run_id="20261206T170300Z-cd34ef", created="2026-12-06T17:03:00Z")
    newer["results"] = [r for r in newer["results"] if r["scenario"] == "enqueue-single"]
    for row in older["results"] + newer["results"]:
        if row["scenario"] in ("enqueue-single", "process"):
            row["metrics"]["client_cpu_us_per_job"] = metric(20.0, "us", spread=0.0)
    out = render(load_docs(tmp_path, older, newer), "client_cpu_section")
    assert "compare rows of the same run only" in out
    rows = [line for line in out.splitlines() if line.startswith(("| `enqueue`", "| AsyncWorker"))]
    assert rows and all(("`cd34ef`" in r) == r.startswith("| `enqueue`") for r in rows)
    assert all("`ab12cd`" in r for r in rows if not r.startswith("| `enqueue`"))
    one = render(load_docs(tmp_path / "one", older), "client_cpu_section")
    assert "| run " not in one  # one run: no column
