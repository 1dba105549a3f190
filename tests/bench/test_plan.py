"""The run plan: variants, per-scenario subsets, Dragonfly configurations (no servers needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import cli, scenarios
from bench.cli import parser
from bench.estimate import SERVER_START_S, plan_estimate, recorded_cells
from bench.plan import (
    Options,
    _config_plans,
    build_plan,
    client_variants_server,
    scenario_options,
    variants,
)
from bench.results import RESULTS_DIR


def options(**kw) -> Options:
    base = dict(servers=["valkey-9.1"], configs=["default", "listpack-1024", "aof-always"],
                scenarios=list(scenarios.ORDER), protocols=[3, 2], parsers=["hiredis", "python"],
                quick=True, repetitions=1, warmup=0)
    return Options(**(base | kw))


def test_every_scenario_module_names_itself() -> None:
    for name in scenarios.ORDER:
        module = scenarios.load(name)
        assert name == module.NAME and module.__doc__
        assert set(module.QUICK) == set(module.DEFAULTS)


def test_variants_vary_one_dimension_from_the_baseline() -> None:
    labels = [(v.config, v.protocol, v.parser, v.primary)
              for v in variants("valkey-9.1", "valkey", ["default", "aof-always"], options())]
    assert labels == [("default", 3, "hiredis", True), ("aof-always", 3, "hiredis", False),
                      ("default", 2, "hiredis", False), ("default", 3, "python", False)]


def test_baseline_runs_full_grids_and_variants_subsets() -> None:
    opts = options(quick=False)
    base, aof = variants("valkey-9.1", "valkey", ["default", "aof-always"], opts)[:2]
    lifecycle = scenarios.load("lifecycle")
    sizes = scenario_options("lifecycle", opts)
    rows = lifecycle.cases(base, sizes)  # one dimension at a time around 64 B, concurrency 8
    assert {(r["payload_bytes"], r["concurrency"]) for r in rows} == {
        (64, 8), (16384, 8), (64, 1), (64, 32)}
    assert lifecycle.cases(aof, sizes) == [{"payload_bytes": 64, "concurrency": 8,
                                            "min_seconds": 2.0}]
    assert scenarios.load("memory").cases(aof, scenario_options("memory", opts)) == []


def test_param_override_and_unknown_key() -> None:
    opts = options(params={"lifecycle": {"min_seconds": 7}})
    assert scenario_options("lifecycle", opts)["min_seconds"] == 7
    with pytest.raises(SystemExit, match="unknown key"):
        scenario_options("lifecycle", options(params={"lifecycle": {"nope": 1}}))


def test_dragonfly_records_aof_as_not_applicable_and_adds_global_locking() -> None:
    plans = {p.label: p for p in _config_plans("dragonfly", options())}
    assert plans["aof-always"].not_applicable
    assert (plans["default"].mode, plans["global-lock"].mode) == ("hashtag", "global")
    assert plans["global-lock"].launcher_config == "default"


def test_client_variations_run_on_the_first_measured_server_only() -> None:
    opts = options(servers=["valkey-9.1", "redis-7.0"], configs=["default"], quick=False)
    plan = build_plan(opts)
    by_server = {s.id: {(c.variant.protocol, c.variant.parser) for c in s.configs[0].cells}
                 for s in plan.servers}
    assert by_server["valkey-9.1"] == {(3, "hiredis"), (2, "hiredis"), (3, "python")}
    assert by_server["redis-7.0"] == {(3, "hiredis")}
    assert client_variants_server(plan, opts) == "valkey-9.1"
    every = build_plan(options(servers=["valkey-9.1", "redis-7.0"], configs=["default"],
                               client_variants="all"))
    assert {c.variant.parser for c in every.servers[1].configs[0].cells} == {"hiredis", "python"}


def test_a_non_default_event_loop_is_recorded_in_every_case() -> None:
    default = build_plan(options(scenarios=["lifecycle"]))
    uv = build_plan(options(scenarios=["lifecycle"], loop="uvloop"))
    assert all("loop" not in case for cell in default.cells for case in cell.cases)
    assert all(case["loop"] == "uvloop" for cell in uv.cells for case in cell.cases)
    assert uv.cells


def test_enqueue_single_sweeps_callers_and_batching_on_the_first_servers_baseline_only() -> None:
    plan = build_plan(options(servers=["valkey-9.1", "redis-7.0"], scenarios=["enqueue-single"],
                              quick=False))
    grid = {(c.variant.server, c.variant.label): [(k["callers"], k["batching"], k["min_seconds"])
                                                  for k in c.cases] for c in plan.cells}
    assert grid[("valkey-9.1", "valkey-9.1/default/resp3/hiredis")] == [
        (n, b, 2.0) for n in (1, 8, 32, 128) for b in (False, True)]  # every throughput case >= 2 s
    others = [cases for key, cases in grid.items() if key[1] != "valkey-9.1/default/resp3/hiredis"]
    assert others and all(cases == [(1, False, 2.0)] for cases in others)


def test_failover_is_opt_in_and_varies_only_topology_fault_and_wait_replicas() -> None:
    assert "failover" in scenarios.ORDER and "failover" not in scenarios.DEFAULT
    assert "failover" not in parser().parse_args([]).scenarios
    assert parser().parse_args(["--scenarios", "failover"]).scenarios == ["failover"]
    opts = options(scenarios=["failover"])
    base = variants("valkey-9.1", "valkey", ["default", "aof-always"], opts)[0]
    rows = scenarios.load("failover").cases(base, scenario_options("failover", opts))
    assert [(r["topology"], r["fault"], r["wait_replicas"]) for r in rows] == [
        (t, f, w) for t in ("sentinel", "cluster") for f in ("kill", "cut-then-kill") for w in (0, 1)]
    assert len({tuple(sorted((k, v) for k, v in r.items() if k not in ("topology", "fault", "wait_replicas")))
                for r in rows}) == 1  # everything else is held equal


def test_a_driver_is_recorded_in_every_case_and_a_missing_one_is_not_measured(monkeypatch) -> None:
    names, parsers, missing = cli.driver_choice("redis-py-pure", list(scenarios.ORDER), ["hiredis"])
    assert names == list(cli.DRIVER_SCENARIOS) and parsers == ["python"] and not missing
    glide = build_plan(options(scenarios=names, driver="glide"))
    assert all(case["driver"] == "glide" for cell in glide.cells for case in cell.cases)
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    _, _, missing = cli.driver_choice("glide", ["process"], ["hiredis"])
    assert "glide" in missing and "not installed" in missing
    [server] = build_plan(options(scenarios=["process"], driver="glide", driver_missing=missing)).servers
    assert server.reason == missing and not server.configs
    with pytest.raises(SystemExit, match="measures only"):
        cli.driver_choice("glide", ["memory"], ["hiredis"])


def _timed_run(root, label: str, seconds: float, *, when: str, quick: bool = False,
               complete: bool = True) -> None:
    doc = json.loads(max((RESULTS_DIR / "v1").glob("*/*.json")).read_text())
    doc["created_utc"], doc["run_id"] = when, f"{when.replace('-', '').replace(':', '')}-{int(seconds):06x}"
    doc["method"].update(quick=quick, complete=complete, repetitions=1, warmup=0,
                         cell_seconds={label: seconds})
    out = Path(root) / "v1" / "x" / f"{doc['run_id']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc))


def test_list_prices_a_cell_by_its_time_in_the_newest_committed_run(tmp_path) -> None:
    # The model alone guessed 29 min for a 3-repetition run whose cells took 42 (78a734).
    plan = build_plan(options(scenarios=["scale-out"], configs=["default"], protocols=[3],
                              parsers=["hiredis"], quick=False, repetitions=3, warmup=0))
    label = plan.cells[0].label
    _timed_run(tmp_path, label, 50.0, when="2026-11-01T00:00:00Z")
    _timed_run(tmp_path, label, 100.0, when="2026-11-02T00:00:00Z")  # the newest complete one
    _timed_run(tmp_path, label, 7.0, when="2026-11-03T00:00:00Z", complete=False)  # cut off
    _timed_run(tmp_path, label, 9.0, when="2026-11-04T00:00:00Z", quick=True)  # other sizes
    recorded = recorded_cells(False, tmp_path)
    assert recorded == {label: (100.0, 1, 0)}
    seconds, priced = plan_estimate(plan, recorded)
    assert priced == 1 and seconds == pytest.approx(300.0 + SERVER_START_S)
    assert plan_estimate(plan, {})[1] == 0 and plan_estimate(plan, {})[0] < 100.0
    assert recorded_cells(True, tmp_path) == {label: (9.0, 1, 0)}


def test_beside_twins_every_baseline_case_right_after_it_and_glide_only_where_it_runs() -> None:
    opts = options(scenarios=["process", "memory"], protocols=[3], beside=["uvloop", "glide"])
    plan = build_plan(opts)
    primary = [c for c in plan.cells if c.variant.primary]
    process = next(c for c in primary if c.scenario == "process")
    base = build_plan(options(scenarios=["process"], protocols=[3])).cells[0].cases
    assert process.cases == [twin for case in base for twin in
                             (case, {**case, "loop": "uvloop"}, {**case, "driver": "glide"})]
    memory = next(c for c in primary if c.scenario == "memory")
    assert {c.get("driver") for c in memory.cases} == {None} and memory.beside == ("uvloop",)
    assert process.label.endswith(" beside uvloop,glide")  # its recorded time is its own
    others = [c for c in plan.cells if not c.variant.primary]
    assert others and all(not c.beside and all("loop" not in k for k in c.cases) for c in others)


@pytest.mark.parametrize(("argv", "message"), [
    (["--beside", "tokio"], "unknown option(s) ['tokio']; choose from uvloop, glide"),
    (["--beside", "uvloop,uvloop"], "names an option twice"),
    (["--beside", "uvloop", "--loop", "uvloop"], "leave --loop and --driver at their defaults"),
    (["--beside", "glide", "--driver", "glide"], "leave --loop and --driver at their defaults"),
])
def test_a_bad_beside_option_is_refused_naming_it(argv: list[str], message: str) -> None:
    args = parser().parse_args(argv)
    with pytest.raises(SystemExit, match=re.escape(message)):
        cli.check_beside(args.beside, args.loop, args.driver)


def test_beside_a_package_that_is_not_installed_is_refused_naming_it(monkeypatch) -> None:
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match="glide and glide_sync not installed"):
        cli.check_beside(["glide"], "asyncio", "redis-py")


def test_each_case_runs_on_the_loop_and_driver_it_names() -> None:
    from bench.scenarios._common import Target, case_target  # noqa: PLC0415

    target = Target("valkey-9.1", "valkey", "9.1.2", "default", "redis://127.0.0.1:1/0")
    assert case_target(target, {"jobs": 1}) == target
    assert case_target(target, {"loop": "uvloop"}).loop == "uvloop"
    assert case_target(target, {"driver": "glide"}).driver == "glide"
    # redis-py-pure is redis-py: its parser was chosen when the repetition's process started
    assert case_target(target, {"driver": "redis-py-pure"}).driver == "redis-py"
