"""One list of stated headline points: Home, History and Servers show a figure at the same conditions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docs_synthetic import make_run

from bench.report import history, home, servers
from bench.report.load import Dataset, load
from bench.report.points import NOT_MEASURED, POINTS

PAGES = {"home": [spec[1] for spec in home.HEADLINES], "history": list(history.HEADLINES),
         "servers": list(servers.COMPARED)}


def dataset(tmp_path: Path, doc: dict[str, Any]) -> Dataset:
    path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return load(tmp_path)


def test_every_page_takes_its_points_from_the_one_list() -> None:
    for page, shown in PAGES.items():
        assert shown, page
        assert all(p in POINTS for p in shown), page


def test_the_same_figure_has_the_same_conditions_on_every_page() -> None:
    stated: dict[tuple[str, str], set[str]] = {}
    for shown in PAGES.values():
        for p in shown:
            conditions = json.dumps([p.label, p.where], sort_keys=True)
            stated.setdefault((p.scenario, p.metric), set()).add(conditions)
    assert {k: v for k, v in stated.items() if len(v) > 1} == {}


def test_home_figures_are_the_figures_history_shows_for_that_run(tmp_path: Path) -> None:
    # The synthetic run holds lifecycle at 8 and 32 tasks and enqueue-bulk at 1 and 4 producers:
    # Home and History once picked different cases of each.
    ds = dataset(tmp_path, make_run())
    table = home.headline(ds).split("\n\n")[0].splitlines()[2:]
    blocks = history.history_section(ds).split("### ")
    checked = 0
    for (_, point, _, _), line in zip(home.HEADLINES, table, strict=True):
        figure = line.split("|")[2].strip()
        if figure == NOT_MEASURED:
            continue
        block = next(b for b in blocks if f'id="chart-history-{point.scenario}"' in b)
        assert figure.rsplit(" ", 1)[0] in block, (point.label, figure)
        checked += 1
    assert checked >= 3
