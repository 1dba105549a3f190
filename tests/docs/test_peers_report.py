"""The Peers page sections, from a synthetic file holding a ``peers`` section."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from docs_synthetic import make_run

from bench import report
from bench.report.load import Dataset


def dataset(tmp_path: Path, *docs: dict[str, Any]) -> Dataset:
    for doc in docs:
        path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return report.load(tmp_path)


def render(ds: Dataset, name: str) -> str:
    return report.SECTIONS[name](ds, "")


def test_peers_sections_give_ratios_and_the_crash_table(tmp_path: Path) -> None:
    ds = dataset(tmp_path, copy.deepcopy(make_run()))
    home = render(ds, "peers_home")
    assert "process at concurrency 32: **10.00x** (best peer: bullmq)" in home
    assert "memory per waiting job" in home
    speed = render(ds, "peers_speed")
    assert "10.00x" in speed and "data-cv-chart=" in speed and "(log axis)" in speed
    sizes = ds.runs.doc.iloc[-1]["peers"]["method"]["sizes"]  # a quick run's small drains are stated
    assert f"a backlog of {sizes['process']} jobs per process case" in speed
    assert "connections cut" in render(ds, "peers_crash")


def test_peers_sections_say_when_nothing_was_measured(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    del doc["peers"]
    ds = dataset(tmp_path, doc)
    assert "No results yet" in render(ds, "peers_speed")
