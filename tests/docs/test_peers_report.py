"""The Peers page sections, from a synthetic file holding a ``peers`` section."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from docs_synthetic import load_docs as dataset
from docs_synthetic import make_run, metric, render

from bench.report.peers_goals import ratio_range, verdict


def test_peers_sections_give_ratios_and_the_crash_table(tmp_path: Path) -> None:
    ds = dataset(tmp_path, copy.deepcopy(make_run()))
    home = render(ds, "peers_home")
    assert ("process at concurrency 32: **10.0x** (9.61\N{EN DASH}10.4) against bullmq (default); "
            "goal 15.0x: **not met**") in home
    assert "Against the best of 1 other Python queue (1 measured)" in home  # counted, not typed
    assert "memory per waiting job" in home
    speed = render(ds, "peers_speed")
    assert "10.0x" in speed and "data-cv-chart=" in speed and "(log axis)" in speed
    sizes = ds.runs.doc.iloc[-1]["peers"]["method"]["sizes"]  # a quick run's small drains are stated
    assert f"a backlog of {sizes['process']} jobs per process case" in speed
    assert "connections cut" in render(ds, "peers_crash")


def test_peers_sections_say_when_nothing_was_measured(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    del doc["peers"]
    ds = dataset(tmp_path, doc)
    assert "No results yet" in render(ds, "peers_speed")


def test_goals_say_which_are_not_met_and_why_from_per_job_costs(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())  # synthetic: Conveyor 10x the peer everywhere
    goals = render(dataset(tmp_path / "a", copy.deepcopy(doc)), "peers_goals")
    assert "process at concurrency 32: not met** (10.0x of 15.0x)" in goals
    assert "bulk enqueue (batch 50): 3.00x" in goals and "| met" in goals
    assert "were not recorded in this run" in goals  # older files: no per-job costs
    for row in doc["peers"]["rows"]:
        if row["scenario"] == "process" and row["params"]["concurrency"] == 32:
            conveyor = row["library"] == "conveyor"
            for name, value in (("commands", 2), ("reads", 0.5), ("server_cpu_us", 20.0),
                                ("client_cpu_us", 30.0 if conveyor else 300.0)):
                row["metrics"][f"per_job_{name}"] = metric(value, "per job")
    cores = doc["environment"]["cores"]
    goals = render(dataset(tmp_path / "b", doc), "peers_goals")
    wanted = 15 * 50 * 32  # 15x the peer's 1,600 jobs/s
    assert f"Reaching 15.0x would take {wanted:,} jobs/s" in goals
    assert f"bounds it near {cores * 1e6 / 50:,.0f} jobs/s" in goals  # 30 + 20 µs per job
    assert f"it measured 16,000, {16_000 * 50 / (cores * 1e4):.0f}% of that bound" in goals
    assert "server reads (round trips)" in goals


def test_a_goal_met_on_one_repetition_or_only_at_the_medians_says_so(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    for row in doc["peers"]["rows"]:
        if row["scenario"] == "memory":  # one repetition, as the memory rows of real runs have
            row["metrics"]["bytes_per_job"] = metric(row["metrics"]["bytes_per_job"]["median"], "B", reps=1)
    goals = render(dataset(tmp_path, doc), "peers_goals")
    memory = next(line for line in goals.splitlines() if line.startswith("| memory per waiting job"))
    assert "met, one repetition: no spread to judge by" in memory
    assert verdict(3.1, 3.0, (2.9, 3.3)) == "met at the medians, not at the worst pairing (2.90x)"
    assert verdict(2.9, 3.0, (2.7, 3.1)) == "**not met** at the medians; the best pairing reaches 3.10x"
    assert verdict(3.5, 3.0, (3.2, 3.8)) == "met"
    higher = {"metrics": {"m": {"count": 3, "min": 90, "max": 110, "median": 100}}}
    lower = {"metrics": {"m": {"count": 3, "min": 9, "max": 11, "median": 10}}}
    assert ratio_range(higher, lower, "m", higher=True) == (90 / 11, 110 / 9)
    assert ratio_range(lower, higher, "m", higher=False) == (90 / 11, 110 / 9)  # smaller is better


def test_the_reproduce_command_is_the_shown_runs_own(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    doc["command"] = ["python", "-m", "bench", "--libraries", "all", "--repetitions", "3"]
    text = render(dataset(tmp_path, doc), "peers_reproduce")
    assert text.startswith("`nox -s bench -- --libraries all --repetitions 3` (the command of run `")


def test_a_goal_no_peer_can_be_compared_on_says_so(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    doc["peers"]["rows"] = [r for r in doc["peers"]["rows"]
                            if not (r["library"] != "conveyor" and r["scenario"] == "enqueue-bulk")]
    goals = render(dataset(tmp_path, doc), "peers_goals")
    assert "no peer measured (or none has the API)" in goals and "nan" not in goals


def test_a_peers_better_tuned_row_sets_the_ratios_and_is_labelled_with_its_settings(
        tmp_path: Path) -> None:
    # Fairness: each peer's best row (default or tuned) is what Conveyor is compared with, and
    # the page says which tuning gave that figure and where its docs name it.
    doc = copy.deepcopy(make_run())
    peers = doc["peers"]
    tuned = [{**copy.deepcopy(r), "flavor": "tuned"} for r in peers["rows"]
             if r["library"] == "bullmq" and r["scenario"] == "process"]
    for row in tuned:
        _scale(row["metrics"]["jobs_per_s"], 2)
    peers["rows"] += tuned
    peers["libraries"]["bullmq"]["flavors"]["tuned"] = {
        "settings": {"processes": 2}, "note": "2 worker processes",
        "source": "https://docs.example/concurrency", "only": "process at concurrency 32"}
    ds = dataset(tmp_path, doc)
    goals = render(ds, "peers_goals")
    assert "(bullmq (tuned: 2 worker processes))" in goals and "not met** (5.00x of 15.0x)" in goals
    assert "process at concurrency 32: **5.00x** (4.80\N{EN DASH}5.20) against bullmq (tuned: 2 worker" \
           " processes)" in render(ds, "peers_home")
    assert ("**tuned**: 2 worker processes ([docs](https://docs.example/concurrency)); measured: "
            "process at concurrency 32") in render(ds, "peers_libraries")


def _scale(figure: dict[str, Any], factor: float) -> None:
    """Every repetition of a metric record times ``factor`` (median, range and MAD with them)."""
    for key in ("median", "min", "max", "mad"):
        figure[key] *= factor
    figure["values"] = [v * factor for v in figure["values"]]


def _conveyor_tuned(doc: dict[str, Any], factor: float) -> None:
    """Add Conveyor's multi-process row at concurrency 32, ``factor`` times its Worker row."""
    peers = doc["peers"]
    row = next(r for r in peers["rows"] if (r["library"], r["scenario"]) == ("conveyor", "process")
               and r["params"]["concurrency"] == 32)
    tuned = {**copy.deepcopy(row), "flavor": "AsyncWorker tuned"}
    _scale(tuned["metrics"]["jobs_per_s"], factor)
    peers["rows"].append(tuned)
    peers["libraries"]["conveyor"]["flavors"]["AsyncWorker tuned"] = {
        "settings": {"worker": "async", "processes": 2}, "note": "2 AsyncWorker processes",
        "source": "tuning.md#worker-processes", "only": "process at concurrency 32"}


def test_conveyors_faster_multi_process_row_sets_its_ratios_and_is_named(tmp_path: Path) -> None:
    # Like for like: the peers' tuned rows use every core, so Conveyor's may too; its best row
    # is what every goal and ratio compares, and the page names the row on both sides.
    doc = copy.deepcopy(make_run())  # synthetic: Conveyor (Worker) 10x the peer everywhere
    _conveyor_tuned(doc, 2.0)
    ds = dataset(tmp_path, doc)
    goals = " ".join(render(ds, "peers_goals").split())
    assert ("| process at concurrency 32: 15.0x | 32,000 (conveyor (AsyncWorker tuned: 2 AsyncWorker "
            "processes)) | 1,600 (bullmq (default)) | 20.0x (19.2\u201320.8) | met |") in goals
    assert "9,000 (conveyor (Worker))" in goals  # the other goals keep the Worker row, without a note
    speed = " ".join(render(ds, "peers_speed").split())
    assert "| Conveyor's row | Worker | AsyncWorker tuned | Worker |" in speed
    assert "| bullmq | 10.0x (default) | 20.0x (default) | 10.0x (default) |" in speed
    assert "process at concurrency 32: **20.0x**" in render(ds, "peers_home")


def test_conveyors_slower_multi_process_row_is_not_used(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    _conveyor_tuned(doc, 0.5)
    ds = dataset(tmp_path, doc)
    assert "AsyncWorker tuned" not in render(ds, "peers_goals")
    assert "| Conveyor's row | Worker | Worker | Worker |" in " ".join(render(ds, "peers_speed").split())


def test_a_concurrency_note_already_in_the_caveat_is_not_repeated(tmp_path: Path) -> None:
    run = make_run()
    libs = run["peers"]["libraries"]
    libs["bullmq"].update(caveats="Concurrency is one process per slot.", concurrency_note="processes")
    out = render(dataset(tmp_path, run), "peers_caveats")
    assert "one process per slot." in out and "Concurrency: processes" not in out
    libs["bullmq"]["caveats"] = "Keeps a lock per job."
    assert "Concurrency: processes." in render(dataset(tmp_path / "again", run), "peers_caveats")


def test_speed_tables_show_each_figures_spread_and_call_a_close_ratio_noise(tmp_path: Path) -> None:
    """The speed tables showed bare medians, and a ratio inside the noise read like a win."""
    doc = copy.deepcopy(make_run())
    for row in doc["peers"]["rows"]:
        if row["library"] == "bullmq" and row["scenario"] == "process" and row["status"] == "ok":
            _scale(row["metrics"]["jobs_per_s"], 10 / 1.05)  # 1.05x behind Conveyor: noise
    speed = " ".join(render(ds := dataset(tmp_path, doc), "peers_speed").split())
    worker = next(r for r in ds.runs.doc.iloc[-1]["peers"]["rows"] if r["library"] == "conveyor"
                  and r["scenario"] == "process" and r["params"].get("concurrency") == 32)
    worker = worker["metrics"]["jobs_per_s"]
    assert f"{worker['min']:,.0f}\N{EN DASH}{worker['max']:,.0f}" in speed  # the range beside the median
    assert "1.05x, noise (default)" in speed


def _workers_cpu(doc: dict[str, Any], cpu: dict[tuple[str, int], float]) -> None:
    """Conveyor's Worker and AsyncWorker process rows with ``cpu[flavor, concurrency]`` µs of worker
    CPU per job."""
    peers = doc["peers"]
    worker = [r for r in peers["rows"] if r["library"] == "conveyor" and r["scenario"] == "process"]
    peers["rows"] += [{**copy.deepcopy(r), "flavor": "AsyncWorker"} for r in worker]
    peers["libraries"]["conveyor"]["flavors"]["AsyncWorker"] = {"settings": {"worker": "async"},
                                                                "note": "asyncio AsyncWorker"}
    for row in peers["rows"]:
        if row["library"] == "conveyor" and row["scenario"] == "process":
            row["metrics"]["per_job_client_cpu_us"] = metric(cpu[row["flavor"], row["params"]["concurrency"]],
                                                             "us/job")


def test_the_async_workers_cpu_per_job_is_computed_from_the_run_shown(tmp_path: Path) -> None:
    """The page said the AsyncWorker 'spent less worker CPU per job than the sync Worker', from
    earlier runs it did not show: the comparison now comes from the run shown, with the noise rule."""
    doc = copy.deepcopy(make_run())
    _workers_cpu(doc, {("Worker", 1): 95.0, ("AsyncWorker", 1): 126.0, ("Worker", 32): 18.5,
                       ("AsyncWorker", 32): 13.8, ("Worker", 100): 10.0, ("AsyncWorker", 100): 9.8})
    out = " ".join(render(dataset(tmp_path, doc), "peers_worker_cpu").split())
    assert ("the `AsyncWorker` against the sync `Worker`: less at concurrency 32 on valkey-9.1; more at "
            "concurrency 1 on valkey-9.1; no difference to call out at concurrency 100 on valkey-9.1") in out
    assert "| valkey-9.1 | 32 | 18.5 (18.1\N{EN DASH}18.9) | 13.8 (13.5\N{EN DASH}14.1) | 1.34x" in out
    assert "| 1.02x (0.98\N{EN DASH}1.06), noise |" in out  # 10.0 against 9.8 µs
    assert "not recorded" in render(dataset(tmp_path / "old", make_run()), "peers_worker_cpu")


def test_the_peers_page_holds_no_typed_claim_about_the_workers_cpu() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "peers.md").read_text()
    assert "in the peer runs before this row was added" not in page
    assert "{{ peers_worker_cpu() }}" in page


def test_the_speed_section_names_the_servers_of_the_run_and_why_one_is_missing(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    doc["peers"]["servers"] = [
        {"id": "valkey-9.1", "measured": True, "family": "valkey", "version": "9.1.2"},
        {"id": "dragonfly", "measured": False, "family": "dragonfly", "version": None,
         "reason": "no dragonfly binary (set DRAGONFLY_BIN)"}]
    speed = render(dataset(tmp_path, doc), "peers_speed")
    assert ("Servers in this run: `valkey-9.1` (Valkey 9.1.2). Not measured: `dragonfly`: "
            "no dragonfly binary (set DRAGONFLY_BIN).") in speed


def _slice(speed: str, title: str) -> str:
    """The part of ``speed`` from ``title`` to the next blank-line-separated title."""
    start = speed.index(title)
    end = min((i for t in ("Enqueue (jobs/s):", "Process (jobs/s):", "Unloaded latency", "How many")
               if (i := speed.find(t, start + 1)) > 0), default=len(speed))
    return speed[start:end]


def test_a_library_row_with_no_figure_in_a_table_is_left_out_of_it(tmp_path: Path) -> None:
    # A tuned row measured at concurrency 32 only filled the enqueue and latency tables with dashes.
    doc = copy.deepcopy(make_run())
    peers = doc["peers"]
    peers["rows"] += [{**copy.deepcopy(r), "flavor": "tuned"} for r in peers["rows"]
                      if r["library"] == "bullmq" and r["scenario"] == "process"
                      and r["params"]["concurrency"] == 32]
    peers["libraries"]["bullmq"]["flavors"]["tuned"] = {"settings": {}, "note": "synthetic"}
    speed = render(dataset(tmp_path, doc), "peers_speed")
    assert "bullmq (tuned)" in _slice(speed, "Process (jobs/s):")
    assert "bullmq (tuned)" not in _slice(speed, "Enqueue (jobs/s):")
    assert "bullmq (tuned)" not in _slice(speed, "Unloaded latency")


def test_where_conveyor_is_behind_beyond_noise_the_speed_section_says_so_and_why(tmp_path: Path) -> None:
    doc = copy.deepcopy(make_run())
    assert "not behind any library beyond noise" in render(dataset(tmp_path, doc), "peers_speed")
    for row in doc["peers"]["rows"]:  # bullmq's latency half of Conveyor's
        if row["library"] == "bullmq" and row["scenario"] == "latency":
            _scale(row["metrics"]["p50_ms"], 0.05)
    speed = " ".join(render(dataset(tmp_path / "behind", doc), "peers_speed").split())
    assert "Conveyor is behind beyond noise in latency p50 against bullmq (0.50x, default)" in speed
    assert "two round trips" in speed  # the why of a latency gap


def test_a_ratio_that_rounds_onto_its_goal_shows_the_digit_that_decides(tmp_path: Path) -> None:
    """The Tuning page read "0.97x" against "at least 0.97x" with "not met" (run dc1019, 0.969);
    the Peers goals share the display: 14.96x would read 15.0x against the goal's 15.0x."""
    doc = copy.deepcopy(make_run())  # synthetic: Conveyor 16,000 jobs/s, 10x the peer
    for row in doc["peers"]["rows"]:
        if row["scenario"] == "process" and row["library"] == "conveyor":
            row["metrics"]["jobs_per_s"] = metric(1600 * 14.96, "1/s")
    goals = render(dataset(tmp_path, doc), "peers_goals")
    assert "process at concurrency 32: not met** (14.96x of 15.0x)" in goals
    assert "process at concurrency 32: **14.96x**" in render(dataset(tmp_path / "h", doc), "peers_home")


def _with_split(doc: dict[str, Any], split_rate: float, reads: tuple[float, float]) -> dict[str, Any]:
    """``doc`` with Conveyor's AsyncWorker at concurrency 32 in one process and split over two."""
    peers = doc["peers"]
    flavors = peers["libraries"]["conveyor"]["flavors"]
    flavors["AsyncWorker"] = {"settings": {"worker": "async"}, "note": "asyncio"}
    flavors["AsyncWorker tuned"] = {"settings": {"worker": "async", "processes": 2}, "note": "split"}
    for flavor, rate, per_job in (("AsyncWorker", 40_000.0, reads[0]),
                                  ("AsyncWorker tuned", split_rate, reads[1])):
        peers["rows"].append({
            "server": "valkey-9.1", "library": "conveyor", "flavor": flavor, "scenario": "process",
            "params": {"concurrency": 32, "jobs": 400}, "status": "ok",
            "counts": {"enqueued": 400, "completed": 400, "lost": 0, "duplicated": 0},
            "metrics": {"jobs_per_s": metric(rate, "1/s"), "per_job_reads": metric(per_job, "reads/job"),
                        "per_job_server_cpu_us": metric(160.0 * per_job, "us/job")}})
    return doc


def test_worker_processes_shows_the_split_against_one_process_from_the_data(tmp_path: Path) -> None:
    def shown(name: str, rate: float, reads: tuple[float, float]) -> str:
        return render(dataset(tmp_path / name, _with_split(copy.deepcopy(make_run()), rate, reads)),
                      "worker_processes")

    slower = shown("a", 30_000.0, (0.0625, 0.125))
    assert "The split was slower on valkey-9.1." in slower
    assert "| 0.75x (" in slower and "0.0625 → 0.125" in slower
    assert "the split made more round trips per job" in slower  # every server's calls got dearer
    faster = shown("b", 60_000.0, (0.0625, 0.0625))
    assert "The split was faster on valkey-9.1." in faster and "more round trips" not in faster
    assert "No results yet" in render(dataset(tmp_path / "c", copy.deepcopy(make_run())), "worker_processes")
