"""History page (bench/report/history.py): points per run, lines only within one machine and method."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from docs_synthetic import make_run

from bench.report import SECTIONS, load
from bench.report.history import HEADLINES, history_figure, points, title

PROCESS = next(h for h in HEADLINES if h.scenario == "process")


def run(run_id: str, created: str, commit: str, *, machine: str = "synthetic", scale: float = 1.0,
        repetitions: int = 3) -> dict[str, Any]:
    doc = make_run(run_id, created)
    doc["git"]["commit"] = commit
    doc["environment"]["machine_label"] = machine
    doc["method"]["repetitions"] = repetitions
    for row in doc["results"]:
        for m in row["metrics"].values():
            m["values"] = [v * scale for v in m["values"]]
            for key in ("median", "mad", "min", "max"):
                m[key] *= scale
    return doc


def dataset(tmp_path: Path, *docs: dict[str, Any]):
    for doc in docs:
        path = tmp_path / "v1" / "conveyor-0.1.0" / f"{doc['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    return load(tmp_path)


def test_runs_of_one_machine_share_a_line_and_another_machine_starts_its_own(tmp_path: Path) -> None:
    ds = dataset(tmp_path,
                 run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", "a" * 40),
                 run("20261102T000000Z-bbbbbb", "2026-11-02T00:00:00Z", "b" * 40, scale=1.1),
                 run("20261103T000000Z-cccccc", "2026-11-03T00:00:00Z", "c" * 40, machine="other"))
    frame = points(ds, PROCESS)
    assert frame.commit.tolist() == ["aaaaaaa", "bbbbbbb", "ccccccc"]
    fig = history_figure(PROCESS, frame)
    lines = {t.name: list(t.x) for t in fig.data}
    assert len(lines) == 2
    same = next(x for name, x in lines.items() if name.startswith("synthetic"))
    other = next(x for name, x in lines.items() if name.startswith("other"))
    assert same == ["0.1.0 · aaaaaaa", "0.1.0 · bbbbbbb"]
    assert other == ["0.1.0 · ccccccc"]


def test_a_different_method_is_never_joined(tmp_path: Path) -> None:
    ds = dataset(tmp_path,
                 run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", "a" * 40, repetitions=3),
                 run("20261102T000000Z-bbbbbb", "2026-11-02T00:00:00Z", "b" * 40, repetitions=7))
    fig = history_figure(PROCESS, points(ds, PROCESS))
    assert sorted(len(t.x) for t in fig.data) == [1, 1]
    assert len({t.name for t in fig.data}) == 2


def test_another_interpreter_is_never_joined(tmp_path: Path) -> None:
    newer = run("20261102T000000Z-bbbbbb", "2026-11-02T00:00:00Z", "b" * 40)
    newer["environment"]["python"] = "3.13.0"
    ds = dataset(tmp_path, run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", "a" * 40), newer)
    fig = history_figure(PROCESS, points(ds, PROCESS))
    assert sorted(len(t.x) for t in fig.data) == [1, 1]
    assert {t.name.split(", method")[0] for t in fig.data} == {
        "synthetic (Test CPU, 2 cores), CPython 3.11.7", "synthetic (Test CPU, 2 cores), CPython 3.13.0"}


def test_page_shows_spread_across_runs_beside_within_run_mad(tmp_path: Path) -> None:
    ds = dataset(tmp_path,
                 run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", "a" * 40),
                 run("20261102T000000Z-bbbbbb", "2026-11-02T00:00:00Z", "b" * 40, scale=1.1))
    text = SECTIONS["history_section"](ds, "")
    assert 'id="chart-history-process"' in text
    # Two runs 10% apart: the range of medians is about 9.5% of their median; within-run MAD 2%.
    process = text.split(f"### {title(PROCESS)}")[1].split("###")[0]
    assert "| 2 " in process and "9.5%" in process and "2.0%" in process
    assert "`aaaaaaa`" in process and "`bbbbbbb`" in process


def test_quick_runs_are_left_out_and_missing_data_says_so(tmp_path: Path) -> None:
    quick = make_run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", quick=True)
    ds = dataset(tmp_path, quick)
    assert points(ds, PROCESS).empty
    assert "No results yet" in SECTIONS["history_section"](ds, "")
    empty = load(tmp_path / "nothing")
    assert "No results yet" in SECTIONS["history_section"](empty, "")


def test_headlines_exist_in_the_synthetic_run(tmp_path: Path) -> None:
    ds = dataset(tmp_path, copy.deepcopy(make_run()))
    assert not points(ds, PROCESS).empty


def test_every_run_row_and_method_name_what_sets_them_apart(tmp_path: Path) -> None:
    # a --beside run holds a point per client: its rows read "machine, method J" three times with
    # three values, and methods C and D both read "(3 repetitions, 1 warm-up)"
    twins = run("20261102T000000Z-bbbbbb", "2026-11-02T00:00:00Z", "b" * 40)
    twins["method"].update(beside=["uvloop"], loop="asyncio")
    extra = []
    for r in twins["results"]:
        if r["scenario"] == "process":
            twin = copy.deepcopy(r)
            twin["params"]["loop"] = "uvloop"
            extra.append(twin)
    twins["results"] += extra
    ds = dataset(tmp_path, run("20261101T000000Z-aaaaaa", "2026-11-01T00:00:00Z", "a" * 40), twins)
    text = SECTIONS["history_section"](ds, "")
    assert "twins beside each case uvloop" in text and "loop asyncio" in text
    rows = [line for line in text.split(f"### {title(PROCESS)}")[1].split("###")[0].splitlines()
            if "bbbbbb" in line and "`bbbbbbb`" in line]
    assert len(rows) == 2 and len({r.split("|")[4] for r in rows}) == 2, rows
    assert any("loop uvloop" in r for r in rows)


def test_a_spread_across_runs_of_several_commits_is_not_called_run_to_run_noise(tmp_path: Path) -> None:
    """The tables were headed 'Run-to-run noise beside within-run noise' and grouped runs by
    machine and method only: the AMD EPYC group's 44.5% held runs at 6458ff9, 91629f3 and
    c5d684f, with code changes between them, read as noise a version change must exceed."""
    ds = dataset(tmp_path, run("20261201T100000Z-aa0001", "2026-12-01T10:00:00Z", "1111111aaaa"),
                 run("20261202T100000Z-aa0002", "2026-12-02T10:00:00Z", "2222222bbbb", scale=1.6))
    out = SECTIONS["history_section"](ds, "")
    section = out.split("### Process")[1].split("??? note")[0]
    assert "Run-to-run noise beside" not in section
    header = next(line for line in section.splitlines() if line.startswith("| machine and method"))
    row = next(line for line in section.splitlines() if line.startswith("| synthetic"))
    cells = dict(zip(header.strip("|").split("|"), row.strip("|").split("|"), strict=True))
    assert cells[next(k for k in cells if "commits" in k)].strip() == "2"


def test_a_spread_across_runs_of_100_percent_or_more_has_three_significant_digits(tmp_path: Path) -> None:
    """'112.5%': a range of three runs' medians written to four significant digits, one more than
    the site writes any measured figure with."""
    ds = dataset(tmp_path, run("20261201T100000Z-aa0001", "2026-12-01T10:00:00Z", "1111111aaaa"),
                 run("20261202T100000Z-aa0002", "2026-12-02T10:00:00Z", "2222222bbbb", scale=3.25))
    section = SECTIONS["history_section"](ds, "").split("### Process")[1].split("??? note")[0]
    row = next(line for line in section.splitlines() if line.startswith("| synthetic"))
    # medians 1,900 and 6,175 about their median 4,037.5: (6,175 - 1,900) / 4,037.5 = 105.9%
    assert "| 106%" in row and "105.9%" not in row
