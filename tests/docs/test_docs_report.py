"""Unit tests of the report layer's page sections (bench/report/): servers, Dragonfly, memory,
persistence, connections, maintenance, methodology and the verdicts that read several runs.

Result documents come from docs_synthetic (schema-valid, built in memory); nothing is read from
results/, and no mkdocs is needed.
"""

from __future__ import annotations

import copy
import html
import json
import subprocess
from importlib import import_module
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conveyor import QueueSettings
from docs_synthetic import load_docs, make_dragonfly_run, make_run, metric, render

from bench.report import compare, connections, servers, text


def test_dragonfly_is_a_ratio_to_the_valkey_of_its_own_run(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run(), make_dragonfly_run())
    out = render(ds, "dragonfly_section")
    assert "1.20x" in out and "0.30x" in out  # both lock modes side by side
    assert "--lock_on_hashtags" in out and "allow-undeclared-keys" in out
    assert "20261130T181041Z-df0001" in out and "20261129T201500Z-ab12cd" not in out
    assert "scenario `lifecycle`: not run on Dragonfly" in out
    home = render(ds, "headline")
    assert "Dragonfly" in home and "servers.md#dragonfly" in home


@pytest.mark.parametrize("speed", [0.4, 0.9])
def test_a_dragonfly_run_on_a_slower_host_is_flagged(tmp_path: Path, speed: float) -> None:
    """The committed Dragonfly run's Valkey reached about half the main run's EVALSHA rate, and
    nothing on the page said its ratios came from a starved host."""
    ds = load_docs(tmp_path, make_run(), make_dragonfly_run(host_speed=speed))
    out, home = render(ds, "dragonfly_section"), render(ds, "headline")
    if speed < 0.6:
        assert "Measured on a slower or busier host" in out and "(0.40x)" in out
        assert "host was slower or busier (valkey-9.1 at 0.40x" in home
    else:
        assert "slower or busier" not in out + home


def test_a_server_measured_in_another_run_keeps_this_runs_reason(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run(), make_dragonfly_run())
    out = render(ds, "servers_section")
    row = next(line for line in out.splitlines() if line.startswith("| dragonfly"))
    assert "not measured in this run[^dragonfly]" in row and "20261130T181041Z-df0001" in row
    assert "[^dragonfly]: no dragonfly binary (set DRAGONFLY_BIN)." in out


def test_home_says_when_the_peer_ratios_come_from_another_machine(tmp_path: Path) -> None:
    same = render(load_docs(tmp_path / "same", make_run()), "headline")
    assert "peer ratios above from run" not in same
    table = make_run()
    del table["peers"]
    peers = make_run("20261128T090000Z-be0001", "2026-11-28T09:00:00Z")
    peers["environment"]["cpu_model"] = "Other CPU"
    home = render(load_docs(tmp_path / "two", table, peers), "headline")
    assert ("come from run `20261129T201500Z-ab12cd` (synthetic, Test CPU, 2 cores); the peer ratios "
            "above from run `20261128T090000Z-be0001` (synthetic, Other CPU, 2 cores)") in home
    dragonfly = render(load_docs(tmp_path / "df", make_run(), make_dragonfly_run()), "headline")
    assert "in its own run (`20261130T181041Z-df0001`, dragonfly-host, Test CPU, 2 cores)" in dragonfly


def test_main_figures_never_come_from_a_two_server_dragonfly_run(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run(), make_dragonfly_run())
    assert "20261130T181041Z-df0001" not in render(ds, "process_section")


def test_a_verdict_that_flips_between_runs_is_not_a_recommendation(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # in the older run AOF always costs nothing
        if row["config"] == "aof-always":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] / 0.2, m["unit"])
    out = render(load_docs(tmp_path, make_run(), older), "persistence_section")
    assert "**differs**" in out
    assert "appendfsync always costs" not in out.split("In every comparable run that measured it")[-1]


def test_an_aof_cost_held_in_every_run_is_stated_as_its_range_over_the_runs(tmp_path: Path) -> None:
    # AOF always costs 80% here and 60% in an older run: the verdict holds in both, the amount
    # does not; the page said "Measured in every comparable run: appendfsync always costs 80%"
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:
        if row["config"] == "aof-always":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] / 0.2 * 0.4, m["unit"])
    empty = make_run("20261129T180000Z-000002", "2026-11-29T18:00:00Z")  # measured no AOF at all
    empty["results"] = [r for r in empty["results"] if r["config"] == "default"]
    out = render(load_docs(tmp_path, make_run(), older, empty), "persistence_section")
    advice = out.split("In every comparable run that measured it:**")[1].split("\n")[0]
    assert "appendfsync always costs 60%\u201380% over 2 runs (costs 80% in this one) in process" in advice
    assert "2 comparable runs measured AOF" in out


def with_repeated_memory(doc: dict[str, Any], saving_at_1024: bool = True) -> dict[str, Any]:
    """Memory rows with 3 repetitions (synthetic ones have 1: never beyond noise)."""
    for row in (r for r in doc["results"] if r["scenario"] == "memory" and "bytes_per_job" in r["metrics"]):
        value = row["metrics"]["bytes_per_job"]["median"]
        if not saving_at_1024 and row["config"] == "listpack-1024" and row["params"]["payload_bytes"] == 1024:
            value = 1500.0  # as much as the default limit: no saving in this run
        row["metrics"]["bytes_per_job"] = metric(value, "B", spread=0.001)
    return doc


def test_the_memory_recommendation_needs_every_comparable_run(tmp_path: Path) -> None:
    alone = render(load_docs(tmp_path / "one", with_repeated_memory(make_run())), "memory_section")
    assert "1024 B (27% less)" in alone and "the only comparable one" in alone
    older = with_repeated_memory(make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z"), False)
    both = render(load_docs(tmp_path / "two", with_repeated_memory(make_run()), older), "memory_section")
    assert "Recommendation" not in both
    assert ("uses less memory with the 1024 limit beyond noise in each of the 2 comparable runs that "
            "measured it") in both


def test_a_comparable_run_without_the_memory_comparison_does_not_veto_it(tmp_path: Path) -> None:
    # an older run of the same method that measured no listpack-1024 memory (a failover-only or
    # peers-only run) neither supports nor contradicts the saving: it read "no payload size uses
    # less memory ... in each of 2 comparable runs" while every run that measured it saved 27%
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    older["results"] = [r for r in older["results"] if r["scenario"] != "memory"]
    out = render(load_docs(tmp_path, with_repeated_memory(make_run()), older), "memory_section")
    assert "**Recommendation:**" in out and "1024 B (27% less)" in out
    assert "the only comparable one that measured it" in out


def test_an_aof_gain_beyond_noise_is_read_as_drift_not_as_a_speed_up(tmp_path: Path) -> None:
    doc = make_run()
    for row in doc["results"]:
        if row["config"] == "aof-everysec":
            for name, m in row["metrics"].items():
                if name.endswith("_per_s"):
                    row["metrics"][name] = metric(m["median"] * 1.5 / 0.98, m["unit"])
    out = render(load_docs(tmp_path, doc), "persistence_section")
    assert "gains" in out and "not a speed-up from AOF" in out
    assert "not a speed-up" not in render(load_docs(tmp_path / "plain", make_run()), "persistence_section")


def test_pool_advice_says_within_the_noise_with_the_ratio_and_its_spread() -> None:
    rows = pd.DataFrame([{"concurrency": 32, "pool_size": p, "median": m, "min": m * 0.8, "max": m * 1.1,
                          "n": 3} for p, m in ((1, 500.0), (2, 1120.0), (32, 1000.0))])
    advice = connections.pool_advice(rows)
    assert "a pool of 2 is within the noise of a pool of 32: jobs/s ratio 1.12x" in advice
    assert "reaches" not in advice and "112%" not in advice


def test_methodology_names_the_baseline_and_how_many_runs_back_its_verdicts(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path / "one", make_run()), "runs_section")
    assert "**The baseline.**" in out and "`20261129T201500Z-ab12cd`" in out
    assert "3 repetitions after 1 warm-up" in out and "rests on this run alone" in out
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    out = render(load_docs(tmp_path / "two", make_run(), older), "runs_section")
    assert "1 other full run of that method on that machine feeds the run-to-run checks" in out
    assert "measured on 2026-11-29 at commit" in out and "{" not in out.split("|")[0]


def test_the_lease_default_is_shown_next_to_the_maintenance_advice(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path, make_run()), "maintenance_section")
    assert f"`lease={QueueSettings().lease}`" in out


def test_calculator_defaults_are_the_library_defaults(tmp_path: Path) -> None:
    out = render(load_docs(tmp_path, make_run()), "calculator")
    assert f'name="producer_pool" type="number" min="0" step="any" ' \
           f'value="{QueueSettings().pool_size}"' in out


def test_source_line_names_commit_and_quick_runs(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run(quick=True))
    out = render(ds, "process_section")
    assert "quick run" in out and "`0123456`" in out


@pytest.mark.parametrize(("git", "shown", "word"), [
    ({"dirty": False, "changed": []}, None, None),
    ({"dirty": True}, "**uncommitted changes** (the files were not recorded)", "dirty (files not recorded)"),
    ({"dirty": True, "changed": ["docs/index.md", "tests/docs/test_x.py"]},
     "uncommitted changes outside the library and benchmark only", "dirty (not the library or benchmark)"),
    ({"dirty": True, "changed": ["bench/peers/run.py", "docs/index.md", "queue/conveyor/_keys.py"]},
     "**uncommitted changes to the library or benchmark** (`bench/peers/run.py`, `queue/conveyor/_keys.py`)",
     "**dirty (library or benchmark)**"),
])
def test_source_line_and_runs_table_say_what_uncommitted_changes_touched(
        tmp_path: Path, git: dict[str, Any], shown: str | None, word: str | None) -> None:
    """The runs table's commit cell said a plain 'dirty' for all three kinds before."""
    doc = make_run()
    doc["git"].update(git)
    ds = load_docs(tmp_path, doc)
    line, runs = render(ds, "process_section"), render(ds, "runs_section")
    if shown is None:
        assert "uncommitted" not in line and "dirty" not in runs
    else:
        assert shown in line and f"`0123456` {word}" in runs


def test_commit_note_counts_changes_to_the_peers_adapters(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()

    adapter = tmp_path / "bench" / "peers" / "adapters" / "arq.py"
    adapter.parent.mkdir(parents=True)
    git("init", "-q")
    for text_ in ("one", "two"):
        adapter.write_text(text_)
        git("add", "-A")
        git("commit", "-q", "-m", text_)
    (tmp_path / "docs.md").write_text("not measured")
    git("add", "-A")
    git("commit", "-q", "-m", "docs only")
    first, second = git("rev-list", "--reverse", "HEAD").split()[:2]
    monkeypatch.setattr(text, "REPO", tmp_path)
    assert "changed in 1 commit since" in text.commit_note.__wrapped__(first)
    assert "changed" not in text.commit_note.__wrapped__(second)


def test_every_section_renders_from_a_complete_file(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, copy.deepcopy(make_run()))
    pages = ("home", "performance", "workload", "servers", "tuning", "connections",
             "methodology")  # the pages of other scenarios (history, ha, ...) test themselves
    for page in pages:
        for name, section in import_module(f"bench.report.{page}").SECTIONS.items():
            # Dragonfly needs a Dragonfly run, client CPU a file recording it (tested below)
            if name not in ("dragonfly_section", "client_cpu_section"):
                assert "No results yet" not in section(ds, ""), name


def test_fields_added_by_the_harness_are_shown(tmp_path: Path) -> None:
    doc = make_run()
    doc["library_defaults"]["queue.pool_size"] = 4  # the default when this file was measured
    ds = load_docs(tmp_path, doc)
    assert "synthetic worker, 32 no-op handlers at once" in render(ds, "headline")
    latency = render(ds, "latency_section")
    assert "| partly busy" in latency and "16 of the 32 handler slots" in latency
    assert latency.index("| unloaded") < latency.index("| partly busy")
    pool = render(ds, "pool_section")
    assert "8 callers" in pool and "32 callers" in pool
    assert f"`pool_size={QueueSettings().pool_size}` (4 when measured)" in pool
    assert 'value="20000"' in render(ds, "calculator")  # memory per connection, measured


def test_files_without_the_new_fields_still_render(tmp_path: Path) -> None:
    doc = make_run()
    del doc["library_defaults"]
    for key in ("process_per_case", "flush_per_case", "case_order", "complete"):
        del doc["method"][key]
    for row in doc["results"]:
        row.pop("headline", None)
    ds = load_docs(tmp_path, doc)
    assert "a process per repetition" in render(ds, "environments_section")
    assert "no-op handlers at once" in render(ds, "headline")


def test_a_server_verdict_that_flips_between_runs_is_not_a_recommendation(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # in the older run redis-7.0 is far ahead in lifecycles
        if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
            rate = row["metrics"]["lifecycles_per_s"]
            row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 3, rate["unit"])
    ds = load_docs(tmp_path, make_run(), older)
    out = render(ds, "servers_section")
    assert "disagree" in out and "not a recommendation" in out
    assert "From this run" not in out
    assert "The other comparable run agrees" in render(load_docs(tmp_path / "one", make_run(),
        make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")), "servers_section")


def test_the_home_page_counts_disagreeing_runs_and_leaves_their_verdicts_to_servers(tmp_path: Path) -> None:
    runs = [make_run()]
    for n in range(1, 4):  # three older runs in which redis-7.0 is far ahead in lifecycles
        older = make_run(f"20261129T19000{n}Z-00000{n}", f"2026-11-29T19:00:0{n}Z")
        for row in older["results"]:
            if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
                rate = row["metrics"]["lifecycles_per_s"]
                row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 3, rate["unit"])
        runs.append(older)
    ds = load_docs(tmp_path, *runs)
    home = next(line for line in render(ds, "headline").splitlines() if line.startswith("- **Servers**"))
    assert "disagree (3 of 3 runs" in home and "not a recommendation" in home
    assert "20261129T190001Z-000001" not in home  # each run's verdict is on the Servers page
    assert render(ds, "servers_section").count("20261129T19000") >= 3


def test_one_repetition_never_supports_a_verdict() -> None:
    one = pd.Series({"median": 200.0, "min": 200.0, "max": 200.0, "n": 1})
    other = pd.Series({"median": 100.0, "min": 100.0, "max": 100.0, "n": 1})
    assert compare.ratio(one, other)["noise"]


def test_methodology_says_what_each_older_run_is_used_for(tmp_path: Path) -> None:
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    other = make_run("20261129T180000Z-000002", "2026-11-29T18:00:00Z")
    other["method"]["repetitions"] = 5
    out = render(load_docs(tmp_path, make_run(), older, other), "runs_section")
    assert "the figures on every page" in out
    assert "run-to-run spread only" in out and "History only: an older run" in out


def test_methodology_names_the_section_that_reads_a_run_apart_from_the_baseline(tmp_path: Path) -> None:
    main = make_run()
    del main["peers"]
    peers = make_run("20261129T210000Z-000003", "2026-11-29T21:00:00Z")
    peers["results"] = [r for r in peers["results"] if r["scenario"] == "reference"][:1]
    peers["results"][0]["server"] = "redis-7.0"  # fewer servers: never the baseline
    out = render(load_docs(tmp_path, main, peers), "runs_section")
    assert "Peers, and its ratios on Home" in out
    assert "History only" not in out


def test_features_case_is_compared_apart_from_the_baseline_grid(tmp_path: Path) -> None:
    ds = load_docs(tmp_path, make_run())
    features = render(ds, "features_section")
    assert "priorities+limit-key+hooks" in features and "0.79x" in features  # 1.5 / 1.9
    process = render(ds, "process_section")
    assert "priorities+limit-key+hooks" not in process  # not a second concurrency-32 row
    assert "features" not in ds.summary.columns and len(ds.featured) > 0
    without = make_run()
    without["results"] = [r for r in without["results"] if "features" not in r["params"]]
    assert "No results yet" in render(load_docs(tmp_path / "old", without), "features_section")


def test_connections_over_several_queues_are_fitted_per_queue(tmp_path: Path) -> None:
    """The per-process formula over several queues comes from the `queues` rows: a pump and a
    maint per queue, one waiter (the synthetic counts), never typed into a page."""
    ds = load_docs(tmp_path, make_run())
    expected = "pump 1 x queues + waiter 1 + maint 1 x queues"
    assert f"**{expected}**" in render(ds, "queues_formula")
    sizing = render(ds, "sizing_formula")
    assert f"**{expected}**" in sizing
    # each formula names the worker it was measured with: thread workers step no pump at 8
    assert "Serving several queues (`conveyor worker -q a,b,c`) with thread workers" in sizing
    assert "Measured per worker process, for one `AsyncWorker`" in sizing
    assert "Asyncio workers over several queues are not measured here" in sizing
    table = render(ds, "connections_queues")
    calc = render(ds, "calculator")
    spec = json.loads(html.unescape(calc.split('data-cv-calc="')[1].split('"')[0]))
    # an extra queue adds the AsyncWorker's own pump and maint (the roles rows), never the thread
    # workers' per-queue slope: the calculator mixed the two kinds of worker
    assert {r["role"] for r in spec["roles"]} >= {"pump", "maint"}
    assert spec["per_queue"] == ["pump", "maint"] and 'name="queues"' in calc
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| 3")]
    assert [cell.strip() for cell in rows[0]] == ["3", "3", "1", "3", "3", "10"]


def test_a_verdict_names_each_comparison_point_apart() -> None:
    # point labels hold commas: listed plainly, two points read as four
    found = pd.DataFrame({"point": ["process, concurrency 32", "enqueue, one per call"], "ratio": [1.3, 1.2],
                          "noise": [False, False]})
    text = servers.recommendation({"valkey-8.1": found})
    assert "ahead in *process, concurrency 32* and *enqueue, one per call*" in text


def test_connection_roles_that_step_are_shown_as_measured_steps(tmp_path: Path) -> None:
    """An AsyncWorker's second pump (and maint) comes at concurrency 8: no line fits 1, 2, 2, so
    the formula and the calculator use the measured counts, never a fitted 1.55 + 0.0056 x c."""
    doc = make_run()
    roles = [r for r in doc["results"] if r["scenario"] == "connections" and r["params"]["kind"] == "roles"]
    low = copy.deepcopy(roles[0])
    low["params"]["concurrency"] = 1
    doc["results"].append(low)
    for row in roles:  # concurrency 8 and 32: two pumps and two maints
        for role in ("pump", "maint"):
            cell = row["metrics"][f"connections_{role}"]
            cell.update(median=2.0, values=[2.0], min=2.0, max=2.0)
    ds = load_docs(tmp_path, doc)
    expected = "pump (1 at concurrency 1, 2 at concurrency 8 to 32) + waiter 1"
    assert expected in render(ds, "sizing_formula")
    calc = render(ds, "calculator")
    spec = json.loads(html.unescape(calc.split('data-cv-calc="')[1].split('"')[0]))
    by_role = {r["role"]: r for r in spec["roles"]}
    assert by_role["pump"] == {"role": "pump", "steps": [[1, 1.0], [8, 2.0], [32, 2.0]]}
    assert by_role["waiter"] == {"role": "waiter", "base": 1.0, "per_concurrency": 0.0}


def test_runs_with_the_same_pick_but_other_verdicts_beyond_noise_do_not_agree(tmp_path: Path) -> None:
    """Comparable runs agree only when every server's verdicts beyond noise do, not only the pick.
    Here the newer run has redis-7.0 behind in lifecycles, the older one level with valkey-9.1
    (the pick, valkey-9.1, unchanged): before, the page said 'The other comparable run agrees'."""
    older = make_run("20261129T190000Z-000001", "2026-11-29T19:00:00Z")
    for row in older["results"]:  # 0.8x of valkey-9.1 in the synthetic run: level in the older one
        if row["server"] == "redis-7.0" and "lifecycles_per_s" in row["metrics"]:
            rate = row["metrics"]["lifecycles_per_s"]
            row["metrics"]["lifecycles_per_s"] = metric(rate["median"] * 1.25, rate["unit"])
    out = render(load_docs(tmp_path, make_run(), older), "servers_section")
    assert "agrees" not in out and "not a recommendation" in out


def test_bars_whose_medians_span_10x_get_a_log_axis() -> None:
    """Performance's ceilings (7k to 155k calls/s) and Tuning's memory by payload drew the small
    bars as slivers on a linear axis."""
    from bench.report.figures import plot  # noqa: PLC0415

    def bars(medians: list[float]) -> Any:
        rows = pd.DataFrame({"case": [f"c{i}" for i in range(len(medians))], "median": medians})
        return plot(rows, "case", None, str, title="t", x_title="x", y_title="y")

    assert bars([7_481.0, 155_130.0]).layout.yaxis.type == "log"
    assert bars([100.0, 900.0]).layout.yaxis.type != "log"


def test_the_servers_page_defines_both_labels_its_table_uses() -> None:
    # the table marks "noise" (ranges overlap) and "within 10%" (ranges apart, under 10%); the page
    # defined noise as either, so a reader took "within 10%" for something else than noise's half
    page = (Path(__file__).resolve().parents[2] / "docs" / "servers.md").read_text()
    intro = " ".join(page.split("{{ servers_section() }}")[0].split())
    assert "*noise*: the repetitions' ranges overlap;" in intro
    assert "*within 10%*: the ranges are apart" in intro
