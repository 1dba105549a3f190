"""Peers: library selection, install failures, counting by id, the cutting proxy, one
Conveyor row driven end to end through the child process, and the Peers page sections."""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import redis
from rich.console import Console

import bench.peers.run as peer_run
import bench.peers.venvs as venvs
from bench.cli import main
from bench.environment import cores
from bench.peers import LIBRARIES, PEERS, Library, resolve
from bench.peers.adapters._base import shares
from bench.peers.costs import server_stats
from bench.peers.crash import SIZES as CRASH
from bench.peers.crash import _wait_all
from bench.peers.drive import Child, Hung, read_log, wait_for
from bench.peers.estimate import known_rates, run_seconds
from bench.peers.measure import SIZES, CountMismatch, Row, count, run_guarded
from bench.peers.proxy import CuttableProxy
from bench.peers.run import PeerRun
from bench.peers.venvs import InstallError, first_error, python_for
from bench.plan import Options
from bench.scenarios._common import used_memory


def test_unknown_library_lists_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="unknown library nope; known: all, conveyor, bullmq"):
        resolve(["conveyor", "nope"])
    assert resolve(["all"]) == list(LIBRARIES)
    assert resolve(["bullmq", "bullmq", "conveyor"]) == ["bullmq", "conveyor"]


def test_install_failure_gives_pips_first_error_line(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVEYOR_BENCH_VENVS", str(tmp_path))
    lib = Library("broken", (str(tmp_path / "no-such-project"),), "conveyor", {}, {}, "")
    with pytest.raises(InstallError) as caught:
        python_for(lib)
    assert str(caught.value).startswith("ERROR")
    assert "\n" not in str(caught.value)
    assert not (next(tmp_path.iterdir()) / ".installed").exists()


def test_first_error_prefers_the_error_line() -> None:
    assert first_error("Collecting x\nERROR: No matching distribution\nERROR: more\n") == \
        "ERROR: No matching distribution"
    assert first_error("") == "pip failed without output"


def test_completions_are_counted_by_id() -> None:
    log = [("a", 1.0), ("b", 1.1), ("b", 1.2), ("z", 1.3)]
    assert count(["a", "b", "c"], log) == {"enqueued": 3, "completed": 2, "lost": 1,
                                           "duplicated": 1, "unknown": 1}
    outcome = run_guarded(lambda: (_ for _ in ()).throw(CountMismatch({"lost": 1})))
    assert outcome["status"] == "failed" and outcome["counts"] == {"lost": 1}


def test_proxy_cut_drops_connections_then_recovers(redis_url: str) -> None:
    host, port = redis_url.split("//")[1].split("/", maxsplit=1)[0].rsplit(":", 1)
    proxy = CuttableProxy(host, int(port))
    client = redis.Redis.from_url(proxy.url, socket_timeout=5)
    try:
        assert client.ping()
        proxy.cut(0.5)
        client.connection_pool.disconnect()
        assert client.ping()  # reopened on the same port
        started = time.monotonic()
        cutter = threading.Thread(target=proxy.cut, args=(1.0,))
        cutter.start()
        time.sleep(0.2)
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(proxy.url, socket_timeout=1).ping()
        cutter.join()
        assert time.monotonic() - started >= 1.0
    finally:
        client.close()
        proxy.close()


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()


def _row(redis_url: str, repetitions: int = 1) -> Row:
    lib = LIBRARIES["conveyor"]
    child = Child(lib, sys.executable, redis_url, lib.flavors["Worker"])
    stats = server_stats(lambda: redis.Redis.from_url(redis_url))
    return Row(child, lambda: _flush(redis_url), lambda: 0, repetitions=repetitions, timeout=60,
               stats=stats)


SMALL = {**SIZES["quick"], "process_s": 0.3, "min_drain_s": 0.1, "probe_jobs": 30, "probe_s": 0.5,
         "process_cap": 1000}


def test_conveyor_row_end_to_end(redis_url: str) -> None:
    row = _row(redis_url)
    out = row.process(4, SMALL)
    assert out["jobs_per_s"]["median"] > 0 and out["_sizing"]["guess_from"] == "probe"
    assert out["_counts"]["completed"] == out["_sizing"]["jobs"][0]
    # What a job cost: the server ran commands for it, the worker's CPU was read. (The kernel
    # charges CPU in clock ticks, 10 ms: a drain this small on a busy machine can be charged none.)
    assert out["per_job_commands"]["median"] > 0 and out["per_job_client_cpu_us"]["median"] >= 0
    assert out["per_job_client_cpu_us"]["unit"] == "us/job"
    bulk = row.enqueue(0.2, "bulk")
    assert bulk["jobs_per_s"]["median"] > 0 and bulk["_sizing"]["jobs"][0] % 50 == 0
    assert bulk["per_job_reads"]["median"] < 1  # 50 jobs per round trip
    # Latency stops sending after its budget, once it has 10 samples.
    latency = row.latency(5000, 0.2)
    assert latency["p50_ms"]["median"] <= latency["p99_ms"]["median"]
    assert 10 <= latency["_sizing"]["samples"][0] < 5000


def test_a_too_short_drain_is_discarded_and_resized_once(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Row(None, lambda: None, lambda: 0, repetitions=2, timeout=60)  # type: ignore[arg-type]
    drained: list[int] = []

    def drain(n: int, concurrency: int) -> tuple[float, float, dict[str, int]]:
        drained.append(n)
        rate = 10_000.0  # far faster than the probe said
        return rate, n / rate, {"completed": n}

    monkeypatch.setattr(row, "probe", lambda *_: 100.0)
    monkeypatch.setattr(row, "_one_drain", drain)
    sizes = {**SIZES["full"], "process_s": 2.0, "process_cap": 60_000}
    out = row.process(32, sizes)
    assert drained == [221, 22001, 22001]  # 100 jobs/s x 2.2 s; then resized to 10k jobs/s
    assert out["_sizing"]["discarded_drain_s"] == [0.022]
    assert out["_sizing"]["drain_s"] == [2.2, 2.2] and row.rate_hint == 10_000.0
    drained.clear()  # the next concurrency is sized from this one's rate, without a probe
    monkeypatch.setattr(row, "probe", lambda *_: pytest.fail("probed although a rate was known"))
    out = row.process(100, sizes)
    assert out["_sizing"]["guess_from"] == "previous concurrency" and drained == [22001, 22001]


def test_crash_wait_gives_up_once_nothing_progresses(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("a 1.0\n")
    started = time.time()
    assert _wait_all(log, {"a", "b"}, started + 30, idle=0.3) is None
    assert time.time() - started < 5  # gave up after the idle time, long before the limit
    log.write_text("a 1.0\nb 1.1\n")
    assert _wait_all(log, {"a", "b"}, time.time() + 30, idle=0.3) is not None


def test_a_hung_child_is_killed(redis_url: str) -> None:
    lib = LIBRARIES["conveyor"]
    child = Child(lib, sys.executable, redis_url, lib.flavors["Worker"])
    log = child.tmp / "never.log"
    log.touch()
    started = time.monotonic()
    with pytest.raises(Hung, match="killed"):  # no worker: the job is never done
        child.call("latency", 2.0, ids=["x"], log=str(log), wait_s=60)
    assert time.monotonic() - started < 20


def test_list_prints_the_peer_plan_without_running_it(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # --list once ran the whole peer comparison (installs, servers, minutes of load).
    def refuse(*_: object) -> str:
        raise AssertionError("--list must not install or run a peer")

    monkeypatch.setattr(venvs, "python_for", refuse)
    assert main(["--libraries", "all", "--servers", "valkey-9.1,redis-8.2", "--list"]) == 0
    out = capsys.readouterr().out
    assert "rq @ valkey-9.1" in out and "bullmq @ redis-8.2" in out
    assert "estimated duration on an idle 2-core machine: ~" in out


def test_the_estimate_follows_the_plan_and_what_a_previous_run_saw() -> None:
    def est(libs: list[str], servers: list[str], reps: int = 1, worst: bool = False,
            prior: dict[str, object] | None = None) -> float:
        return run_seconds(libs, servers, quick=False, reps=reps, timeout=180, worst=worst,
                           prior=prior or {})

    one = est(["conveyor", "huey"], ["valkey-9.1"])
    assert est(["conveyor", "huey"], ["valkey-9.1", "redis-8.2"]) > 1.9 * one
    assert est(["conveyor", "huey"], ["valkey-9.1"], reps=3) > 1.5 * one  # the crash table runs once
    # A fault never recovered from costs the idle wait; at worst every fault waits the limit.
    worst = est(["conveyor", "huey"], ["valkey-9.1"], worst=True)
    assert worst - one > 5 * (CRASH["full"]["limit_s"] - CRASH["full"]["idle_s"])
    # A 2 jobs/s library drains its 20-job floor for 10 s, not 2 s.
    slow = {"rows": [{"library": "huey", "flavor": "default", "scenario": "process",
                      "params": {"concurrency": 1}, "metrics": {"jobs_per_s": {"median": 2.0}}}]}
    assert est(["huey"], ["valkey-9.1"], prior=slow) > est(["huey"], ["valkey-9.1"]) + 7


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_every_adapter_sends_the_same_payload_to_the_same_handler(name: str) -> None:
    # Fairness: one payload builder and one no-op handler (with its log write) for everyone, so
    # no library is timed with a lighter job or a cheaper completion record.
    source = (Path(venvs.REPO_ROOT) / "bench" / "peers" / "adapters" /
              f"{LIBRARIES[name].adapter}.py").read_text()
    assert "_base.payload(" in source
    assert "_base.sync_handler(" in source or "_base.async_handler(" in source
    assert "time.time()" not in source and "os.write" not in source  # no private completion log


def test_a_previous_runs_rate_sizes_the_backlog_without_a_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Row(None, lambda: None, lambda: 0, repetitions=1, timeout=60)  # type: ignore[arg-type]
    row.known = known_rates({"rows": [{"library": "huey", "flavor": "default", "scenario": "process",
                                       "params": {"concurrency": 32},
                                       "metrics": {"jobs_per_s": {"median": 1000.0}}}]},
                            "huey", "default")
    monkeypatch.setattr(row, "probe", lambda *_: pytest.fail("probed although a rate was known"))
    monkeypatch.setattr(row, "_one_drain", lambda n, c: (1000.0, n / 1000, {"completed": n}))
    out = row.process(32, SIZES["full"])
    assert out["_sizing"]["guess_from"] == "previous run" and out["_sizing"]["jobs"] == [2201]


def test_memory_per_waiting_job_is_repeatable(redis_url: str) -> None:
    # Filling in calls of 500 and flushing between points made Conveyor's slope on Redis 8.2
    # swing from 108 to 324 B/job between repetitions (query buffers, a moving baseline); then
    # Lua garbage, which Redis 8 counts in used_memory, from 128 to 223 B/job (a red CI run).
    lib = LIBRARIES["conveyor"]
    child = Child(lib, sys.executable, redis_url, lib.flavors["Worker"])

    def used() -> int:
        client = redis.Redis.from_url(redis_url)
        try:
            return used_memory(client)
        finally:
            client.close()

    row = Row(child, lambda: _flush(redis_url), used, repetitions=3, timeout=60)
    values = row.memory([1000, 2000, 3000])["bytes_per_job"]["values"]
    # With the Lua heap collected before each reading, 8 repetitions on Redis 8.2 spanned
    # 170.3 to 172.3 B/job (Valkey 9.1: 180.8 to 181.2); one CI run on Valkey 8.1 spanned 175.0
    # to 185.3 (5.9%). 10% still catches the swings above (108 to 324, 128 to 223).
    assert min(values) > 50 and max(values) < 1.10 * min(values), values


def test_used_memory_leaves_out_lua_garbage(redis_url: str) -> None:
    # Redis 8.2 counts its Lua heap in used_memory: 1.7 MB of script garbage read as data.
    # Collected, up to about 150 kB stays with the Lua allocator (vm_eval 32 kB -> 160 kB).
    client = redis.Redis.from_url(redis_url)
    try:
        before = used_memory(client)
        client.eval("local t = {} for i = 1, 20000 do t[i] = tostring(i) .. 'x' end return 1", 0)
        assert used_memory(client) - before < 500_000
    finally:
        client.close()


def test_a_child_removes_its_temporary_directory(redis_url: str) -> None:
    # A full peer run left about a thousand peer-* directories in /tmp.
    child = Child(LIBRARIES["conveyor"], sys.executable, redis_url, {})
    tmp = child.tmp
    (tmp / "spec-1.json").write_text("{}")
    del child
    gc.collect()
    assert not tmp.exists()


def test_every_peer_has_a_tuned_row_with_its_documented_source() -> None:
    # Fairness (issue 9): each peer at its defaults and at its best documented tuning, both shown,
    # the tuning cited; a peer without one would say "no documented tuning" instead.
    for name in PEERS:
        lib = LIBRARIES[name]
        assert "default" in lib.flavors, name
        if "tuned" not in lib.flavors:
            assert "no documented tuning" in lib.notes["default"], name
            continue
        assert lib.notes["tuned"] and lib.notes["tuned"] != lib.notes["default"], name
        if name not in ("arq", "rq", "celery"):  # tuned before sources were recorded
            assert lib.sources["tuned"].startswith("https://"), name


def test_the_result_file_records_each_rows_settings_note_and_source(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Info:
        def __init__(self, *_: object) -> None: ...

        def call(self, *_: object) -> dict[str, object]:
            return {"versions": {"library": "1"}, "sync_enqueue": True, "async_enqueue": False,
                    "bulk": None}

    monkeypatch.setattr(peer_run, "python_for", lambda lib: sys.executable)
    monkeypatch.setattr(peer_run, "Child", Info)
    opts = Options([], [], [], [], [], quick=True, repetitions=1, warmup=0)
    run = PeerRun(opts, ["dramatiq", "huey"], Console(quiet=True), [])
    for name in ("dramatiq", "huey"):
        run._install(LIBRARIES[name])
    libraries = run._document()["peers"]["libraries"]
    flavors = libraries["dramatiq"]["flavors"]
    assert flavors["tuned"]["settings"]["processes"] >= 1
    assert flavors["tuned"]["source"] == "https://dramatiq.io/guide.html"
    assert "processes" in flavors["tuned"]["note"] and "source" not in flavors["default"]
    assert flavors["tuned"]["only"] == "process at concurrency 32 (no latency case)"
    huey = libraries["huey"]["flavors"]["tuned"]
    assert huey["settings"]["consumer"] == {"worker_type": "greenlet"}
    assert huey["source"].startswith("https://huey.readthedocs.io/")


def test_a_row_split_over_processes_keeps_its_concurrency_and_counts_every_job(
        redis_url: str) -> None:
    # Tuned rows run the scenario's concurrency over several worker processes (one per core):
    # the total stays the scenario's, and no job is lost or run twice across the processes.
    assert shares(32, 2) == [16, 16] and shares(5, 2) == [3, 2] and shares(1, 4) == [1]
    assert sum(shares(100, 3)) == 100
    # Conveyor's own tuned row (AsyncWorker), with two processes whatever this machine's cores
    settings = {**LIBRARIES["conveyor"].flavors["AsyncWorker tuned"], "processes": 2}
    child = Child(LIBRARIES["conveyor"], sys.executable, redis_url, settings)
    _flush(redis_url)
    job_ids = [f"split-{i}" for i in range(300)]
    child.call("fill", 60, ids=job_ids)
    log = child.tmp / "split.log"
    worker = child.start_worker(4, log)
    try:
        assert wait_for(log, len(job_ids), 60, worker)
        assert len(psutil.Process(worker.proc.pid).children()) == 2
    finally:
        worker.kill()
    assert count(job_ids, read_log(log)) == {"enqueued": 300, "completed": 300, "lost": 0,
                                             "duplicated": 0, "unknown": 0}


def test_a_row_limited_to_the_compared_case_runs_only_it() -> None:
    # The tuned rows added for every peer run process at concurrency 32 only (what the goal
    # compares), so the full peer run stays near 30 min.
    added: list[tuple[str, object]] = []

    def add(scenario: str, params: dict[str, object], fn: object, status: str = "ok") -> None:
        added.append((scenario, params.get("concurrency")))

    api = {"sync": True, "async": False, "bulk": None}
    for flavor, wanted in (("default", [("process", 1), ("process", 32), ("process", 100),
                                        ("latency", None)]), ("tuned", [("process", 32)])):
        added.clear()
        concurrencies, latency = LIBRARIES["dramatiq"].cases(flavor, [1, 32, 100])
        PeerRun._row(None, add, api, {**SIZES["full"], "concurrencies": concurrencies},  # type: ignore[arg-type]
                     False, latency=latency)
        assert added == wanted, flavor


def test_a_new_tuned_row_is_sized_from_its_default_rows_earlier_rate() -> None:
    # A tuned row added since the last full run has no rate of its own yet: its backlog is sized
    # from the default row's rate (no probe), and the --list estimate assumes the same.
    prior = {"rows": [{"library": "huey", "flavor": "default", "scenario": "process",
                       "params": {"concurrency": 32}, "metrics": {"jobs_per_s": {"median": 900.0}}}]}
    assert known_rates(prior, "huey", "tuned") == {32: 900.0}
    prior["rows"].append({**prior["rows"][0], "flavor": "tuned",
                          "metrics": {"jobs_per_s": {"median": 1800.0}}})
    assert known_rates(prior, "huey", "tuned") == {32: 1800.0}


def test_conveyors_tuned_row_splits_its_asyncworker_over_one_process_per_core(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Like for like with the peers' tuned rows: the same total concurrency over one worker
    # process per core, at concurrency 32 only, its settings and note in the result file.
    lib = LIBRARIES["conveyor"]
    assert lib.flavors["AsyncWorker tuned"] == {"worker": "async", "processes": cores()}
    assert lib.cases("AsyncWorker tuned", [1, 32, 100]) == ([32], False)
    assert lib.cases("AsyncWorker", [1, 32, 100]) == ([1, 32, 100], True)
    monkeypatch.setattr(peer_run, "python_for", lambda lib: sys.executable)
    monkeypatch.setattr(peer_run, "Child", _Info)
    run = PeerRun(Options([], [], [], [], [], quick=True, repetitions=1, warmup=0), ["conveyor"],
                  Console(quiet=True), [])
    run._install(lib)
    tuned = run._document()["peers"]["libraries"]["conveyor"]["flavors"]["AsyncWorker tuned"]
    assert tuned["settings"] == {"worker": "async", "processes": cores()}
    assert f"{cores()} AsyncWorker processes" in tuned["note"]
    assert tuned["source"] == "tuning.md#worker-processes"
    assert tuned["only"] == "process at concurrency 32 (no latency case)"
    # sized from the AsyncWorker row it splits (not the first, sync Worker row) until it has a rate
    prior = {"rows": [{"library": "conveyor", "flavor": f, "scenario": "process",
                       "params": {"concurrency": 32}, "metrics": {"jobs_per_s": {"median": rate}}}
                      for f, rate in (("Worker", 100.0), ("AsyncWorker", 200.0))]}
    assert known_rates(prior, "conveyor", "AsyncWorker tuned") == {32: 200.0}


class _Info:
    def __init__(self, *_: object) -> None: ...

    def call(self, *_: object) -> dict[str, object]:
        return {"versions": {"library": "1"}, "sync_enqueue": True, "async_enqueue": True,
                "bulk": "sync"}


def test_a_split_worker_imports_its_library_once_before_forking(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Importing Conveyor takes most of a second on a loaded machine: imported in each forked
    # process, the second one was still importing while a short timed drain ran on the first.
    import bench.peers._child as child_mod  # noqa: PLC0415

    events: list[str] = []
    real = child_mod.importlib.import_module
    monkeypatch.setattr(child_mod.importlib, "import_module",
                        lambda name: events.append(f"import {name}") or real(name))
    monkeypatch.setattr(child_mod._base, "fork_each",
                        lambda slots, run: events.append(f"fork {slots}"))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"mode": "worker", "adapter": "conveyor", "url": "redis://127.0.0.1:1/0",
                                "settings": {"worker": "async", "processes": 2}, "concurrency": 32,
                                "log": str(tmp_path / "log")}))
    child_mod.main(str(spec), str(tmp_path / "out.json"))
    assert events[-2:] == ["import conveyor", "fork [16, 16]"]
