"""High availability page (bench/report/ha.py): ACL rules from the library, scale-out tables."""

from __future__ import annotations

import html
import json
from pathlib import Path

from conveyor import acl_rules
from docs_synthetic import make_run, metric, row

from bench.report import SECTIONS, load
from bench.report.ha import acl_setup, durability_table, scale_out_table, tls_table


def _dataset(tmp_path: Path, with_scale_out: bool):  # type: ignore[no-untyped-def]
    doc = make_run()
    if with_scale_out:
        shared = {"min_seconds": 2.0, "batch": 50, "payload_bytes": 64}
        for queues, rate, balance in ((1, 4000.0, 1.0), (3, 9000.0, 0.9)):
            doc["results"].append(row("scale-out", {"topology": "cluster", "queues": queues, **shared}, {
                "jobs_per_s": metric(rate, "1/s"), "shards_used": metric(min(queues, 3), "count", 0),
                "shard_balance": metric(balance, "ratio", 0)}))  # fmt: skip
        for wait, rate in ((0, 3000.0), (1, 1500.0)):
            params = {"topology": "replicated", "wait_replicas": wait, **shared}
            doc["results"].append(row("scale-out", params, {
                "jobs_per_s": metric(rate, "1/s"), "p50_ms": metric(0.3 * (1 + wait), "ms"),
                "p99_ms": metric(0.9 * (1 + wait), "ms")}))  # fmt: skip
        for flag, rate in ((0, 3000.0), (1, 2400.0)):
            params = {"tls": flag, "min_seconds": 2.0, "payload_bytes": 64}
            doc["results"].append(row("tls", params, {
                "jobs_per_s": metric(rate, "1/s"), "p50_ms": metric(0.3, "ms"),
                "p99_ms": metric(0.9, "ms")}, server="redis-7.0"))  # fmt: skip
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


def test_missing_results_say_so(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, False)
    assert "No results yet" in scale_out_table(ds, "")
    assert "No results yet" in durability_table(ds, "")
    assert "No results yet" in tls_table(ds, "")


def test_sections_are_registered() -> None:
    assert {"ha_acl_setup", "ha_scale_out_table", "ha_durability_table", "ha_tls_table"} <= set(SECTIONS)
