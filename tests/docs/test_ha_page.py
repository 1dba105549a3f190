"""High availability page (bench/report/ha.py): ACL rules from the library, scale-out tables."""

from __future__ import annotations

import html
import json
from pathlib import Path

from conveyor import acl_rules
from docs_synthetic import make_run

from bench.report import SECTIONS, load
from bench.report.ha import acl_setup, durability_table, failover_table, scale_out_table, tls_table


def _dataset(tmp_path: Path, with_ha: bool):  # type: ignore[no-untyped-def]
    doc = make_run()
    if not with_ha:
        doc["results"] = [r for r in doc["results"] if r["scenario"] not in ("scale-out", "tls", "failover")]
    path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return load(tmp_path)


def test_the_acl_line_is_the_one_the_tests_use(tmp_path: Path) -> None:
    text = acl_setup(_dataset(tmp_path, False), "")
    assert html.escape(f"ACL SETUSER conveyor on >CHANGE-ME {acl_rules()}") in text
    assert acl_rules(queue="emails") in text


def test_scale_out_tables_show_each_case(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, True)
    spread = scale_out_table(ds, "")
    assert "| valkey-9.1 | 3 " in spread and "9,000" in spread and "0.900" in spread
    durable = durability_table(ds, "")
    assert "1,500" in durable and "3,000" in durable
    assert "2,400" in tls_table(ds, "") and "redis-7.0" in tls_table(ds, "")


def test_tls_ratio_is_computed_from_the_two_cases(tmp_path: Path) -> None:
    text = tls_table(_dataset(tmp_path, True), "")
    assert "redis-7.0: TLS / plain throughput 0.80x" in text
    assert "TLS costs 20%" in text  # 2,400 vs 3,000 jobs/s, repetitions apart


def test_failover_table_totals_losses_per_topology_and_setting(tmp_path: Path) -> None:
    text = failover_table(_dataset(tmp_path, True), "")
    lines = [line for line in text.splitlines() if line.startswith("| valkey-9.1")]
    rows = [[c.strip() for c in line.split("|")] for line in lines]
    assert len(rows) == 16  # eight cases, in the losses table and in the recovery table
    losses = {(*c[2].removesuffix(", 3 kills").split(", "), c[3]): c[4:-1] for c in rows[:8]}
    recovery = {tuple(c[2:5]): c[5:-1] for c in rows[8:]}
    # three kills per case: after a cut, 2 lost per kill without wait_replicas, none with it
    assert losses[("sentinel", "cut-then-kill", "0")] == ["12,000", "6", "3"]
    assert losses[("sentinel", "kill", "0")] == ["12,000", "0", "3"]
    assert losses[("cluster", "cut-then-kill", "1")] == ["12,000", "0", "3"]
    spread = "2.50 (2.25\N{EN DASH}2.75)"  # three repetitions: their range
    assert recovery[("cluster", "cut-then-kill", "1")] == [spread, spread]


def test_missing_results_say_so(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, False)
    assert "No results yet" in scale_out_table(ds, "")
    assert "No results yet" in durability_table(ds, "")
    assert "No results yet" in tls_table(ds, "")
    assert "No results yet" in failover_table(ds, "")


def test_sections_are_registered() -> None:
    assert {"ha_acl_setup", "ha_scale_out_table", "ha_durability_table", "ha_tls_table",
            "ha_failover_table"} <= set(SECTIONS)
