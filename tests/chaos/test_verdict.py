"""The chaos verdict's rules on hand-written run records (no server): what counts as a repeat run,
which repeats a killed or cut-off worker explains, and attempts spent without a run; and the
rules for limit keys, cancels, time limits and stored results."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from _cancels import cancel_problems
from _chaos import ChaosConfig
from _fleet import Abandoned, open_runs, remaining_work
from _key_limits import key_overlaps
from _producer import Cancel
from _results_check import result_problems
from _stalls import blocked, read_stalls
from _time_limits import overtime_outcomes
from _verdict import grew, memory_growth, repeats
from conveyor import JobCancelledError, JobFailedError

CFG = ChaosConfig(sync_concurrency=2, async_concurrency=2)


class FakeFleet:
    def __init__(self, runs_dir: Path, abandoned: list[Abandoned]) -> None:
        self.runs_dir = runs_dir
        self.abandoned = abandoned


def write(runs_dir: Path, pid: int, *lines: str) -> None:
    """Lines of `event job attempt at`; the pid and a handler time of 0 ms are filled in."""
    text = "".join(f"{e} {j} {a} {pid} {t} 0\n" for e, j, a, t in (line.split() for line in lines))
    with (runs_dir / f"{pid}.runs").open("a") as f:
        f.write(text)


def test_retry_after_handler_failure_is_not_a_repeat(tmp_path: Path) -> None:
    write(tmp_path, 1, "start a 1 1.0", "fail a 1 1.1")
    write(tmp_path, 2, "start a 2 2.0", "ok a 2 2.1")
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert (result.total, result.skipped, result.unexplained) == (0, 0, [])


def test_repeat_after_a_kill_is_explained_and_one_after_success_is_not(tmp_path: Path) -> None:
    write(tmp_path, 1, "start a 1 1.0")  # killed mid-run
    write(tmp_path, 2, "start a 2 3.0", "ok a 2 3.1", "start b 1 4.0", "ok b 1 4.1")
    write(tmp_path, 3, "start b 2 9.0", "ok b 2 9.1")  # b ran again though pid 2 lived on
    result = repeats(FakeFleet(tmp_path, [Abandoned(1, "sync", "kill", 1)]), CFG)
    assert result.total == 2
    assert len(result.unexplained) == 1 and "b ran again" in result.unexplained[0]


def test_more_repeats_than_a_killed_worker_could_hold_are_flagged(tmp_path: Path) -> None:
    for job in "abc":
        write(tmp_path, 1, f"start {job} 1 1.0")
        write(tmp_path, 2, f"start {job} 2 5.0", f"ok {job} 2 5.1")
    result = repeats(FakeFleet(tmp_path, [Abandoned(1, "sync", "kill", 3)]), CFG)
    assert result.total == 3
    assert any("held at most 2 jobs, yet 3 ran again" in u for u in result.unexplained)


def test_attempts_spent_without_a_run_beyond_what_kills_explain(tmp_path: Path) -> None:
    write(tmp_path, 2, "start a 3 5.0", "ok a 3 5.1")  # attempts 1 and 2 never ran
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert result.skipped == 2
    assert any("2 attempts were spent without a run" in u for u in result.unexplained)
    explained = repeats(FakeFleet(tmp_path, [Abandoned(9, "async", "kill", 0)]), CFG)
    assert explained.skipped == 2 and explained.unexplained == []


def stall(runs_dir: Path, pid: int, line: str) -> None:
    with (runs_dir / f"{pid}.stalls").open("a") as f:
        f.write(line + "\n")


def ci_case(runs_dir: Path) -> None:
    """The clean-clone CI failure: a 3.5 s job ran 16.6 s in pid 1, then again in pid 1."""
    write(runs_dir, 1, "start a 1 100.0", "ok a 1 116.6", "start a 2 117.0", "ok a 2 120.5")


def test_repeat_after_a_starved_or_frozen_worker_is_the_at_least_once_case(tmp_path: Path) -> None:
    ci_case(tmp_path)
    stall(tmp_path, 1, "loop 101.0 13.0 cpu=0.10 runq=12.40 thread_late=0.30 kernel=R/0:240")
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert result.total == 1 and result.unexplained == []
    assert len(result.after_stalls) == 1 and "starved" in result.after_stalls[0]
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    ci_case(frozen)
    stall(frozen, 1, "loop 101.0 13.0 cpu=0.00 runq=0.00 thread_late=12.90 kernel=-")
    assert "frozen" in repeats(FakeFleet(frozen, []), CFG).after_stalls[0]
    stepped = tmp_path / "clock"
    stepped.mkdir()
    ci_case(stepped)
    stall(stepped, 1, "clock 102.0 13.10")  # the wall clock (and the server's TIME) jumped
    assert "clock" in repeats(FakeFleet(stepped, []), CFG).after_stalls[0]


def test_more_repeats_than_a_stalled_worker_could_hold_are_flagged(tmp_path: Path) -> None:
    for job in "abc":
        write(tmp_path, 1, f"start {job} 1 100.0", f"ok {job} 1 110.0")
        write(tmp_path, 2, f"start {job} 2 108.0", f"ok {job} 2 108.1")
    stall(tmp_path, 1, "process 100.5 9.0 cpu=0.00 runq=0.00 thread_late=9.00 kernel=-")
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert len(result.after_stalls) == 3
    assert any("stalled holding at most 2 jobs, yet 3 ran again" in u for u in result.unexplained)


def test_a_blocked_loop_is_a_problem_and_explains_no_repeat(tmp_path: Path) -> None:
    ci_case(tmp_path)
    stall(tmp_path, 1, "loop 101.0 13.0 cpu=0.05 runq=0.01 thread_late=0.00 "
                       "kernel=S/do_select:250 at _connection.py:9 connect")  # fmt: skip
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert result.after_stalls == []
    assert any("a ran again" in u for u in result.unexplained)
    assert any("event loop blocked 13.0 s" in u and "connect" in u for u in result.unexplained)


def test_a_loaded_machine_is_starvation_and_a_short_own_part_no_problem(tmp_path: Path) -> None:
    # waiting for a CPU is the largest part: starved, though under half the stall
    stall(tmp_path, 1, "loop 101.0 2.0 cpu=0.50 runq=0.90 thread_late=0.00 kernel=R/0:30")
    # computing a little longer than waiting, but only 1.2 s of its own: under a third of the lease
    stall(tmp_path, 2, "loop 101.0 2.0 cpu=1.05 runq=0.80 thread_late=0.00 kernel=R/0:30")
    [starved, busy] = read_stalls(tmp_path)
    assert (starved.cause, busy.cause) == ("starved", "blocked")
    assert blocked([starved, busy], CFG.lease) == []


def test_a_short_stall_or_one_elsewhere_explains_no_repeat(tmp_path: Path) -> None:
    ci_case(tmp_path)
    stall(tmp_path, 1, "loop 101.0 2.0 cpu=0.00 runq=2.00 thread_late=0.00 kernel=R/0:40")  # < 2/3 lease
    stall(tmp_path, 1, "loop 130.0 9.0 cpu=0.00 runq=9.00 thread_late=0.00 kernel=R/0:40")  # after it
    stall(tmp_path, 2, "loop 101.0 13.0 cpu=0.00 runq=13.00 thread_late=0.00 kernel=R/0:40")  # other pid
    result = repeats(FakeFleet(tmp_path, []), CFG)
    assert result.after_stalls == [] and len(result.unexplained) == 1


def test_open_runs_and_remaining_work(tmp_path: Path) -> None:
    write(tmp_path, 1, "start a 1 1.0", "ok a 1 1.1", "start b 1 2.0")
    assert open_runs(tmp_path / "1.runs") == 1
    (tmp_path / "2.runs").write_text("start c 1 2 9999999999.0 1000\n")
    assert remaining_work(tmp_path / "2.runs") > 1000
    assert remaining_work(tmp_path / "1.runs") == 0.0


def test_memory_check_passes_noise_and_catches_a_leak() -> None:
    noisy = [(float(t), 2_000_000 + (t % 7) * 30_000) for t in range(300)]
    growth = memory_growth(noisy)
    assert growth is not None and not grew(growth)
    leaking = [(float(t), 2_000_000 + t * 3_000) for t in range(300)]  # ~3 KB/s: unretained jobs
    growth = memory_growth(leaking)
    assert growth is not None and grew(growth)
    assert memory_growth(noisy[:10]) is None  # too short to judge


def keyed(runs_dir: Path, pid: int, *lines: str) -> None:
    """Lines of `event job attempt at key`, as the worker records a limited job's runs."""
    text = "".join(f"{e} {j} {a} {pid} {t} 0 {k}\n" for e, j, a, t, k in (line.split() for line in lines))
    with (runs_dir / f"{pid}.runs").open("a") as f:
        f.write(text)


def overlaps(runs_dir: Path, abandoned: list[Abandoned]) -> tuple[int, list[str]]:
    by_job = repeats(FakeFleet(runs_dir, abandoned), CFG).by_job
    return key_overlaps(by_job, read_stalls(runs_dir), abandoned, CFG)


def test_more_runs_of_a_key_at_once_than_its_concurrency_is_a_problem(tmp_path: Path) -> None:
    keyed(tmp_path, 1, "start a 1 1.0 k", "start b 1 1.5 k", "ok a 1 2.0 k", "ok b 1 2.5 k")
    keyed(tmp_path, 2, "start c 1 2.0 k", "ok c 1 3.0 k", "start d 1 1.7 j", "ok d 1 2.2 j")
    assert overlaps(tmp_path, []) == (2, [])  # c starts as a ends; d holds another key
    keyed(tmp_path, 2, "start e 1 1.8 k", "ok e 1 1.9 k")
    most, problems = overlaps(tmp_path, [])
    assert most == 3 and len(problems) == 1
    assert "limit key k: 3 runs at once at 1.800 (concurrency 2): ['a', 'b', 'e']" in problems[0]


def test_a_run_that_lost_its_lease_may_overlap_its_keys_next_runs(tmp_path: Path) -> None:
    keyed(tmp_path, 1, "start a 1 100.0 k", "ok a 1 110.0 k")  # pid 1 froze for 9 s
    keyed(tmp_path, 2, "start b 1 106.0 k", "start c 1 106.5 k", "ok b 1 107.0 k", "ok c 1 107.0 k")
    assert overlaps(tmp_path, [])[0] == 3
    stall(tmp_path, 1, "process 100.5 9.0 cpu=0.00 runq=0.00 thread_late=9.00 kernel=-")
    assert overlaps(tmp_path, []) == (2, [])
    cut = tmp_path / "cut"
    cut.mkdir()
    keyed(cut, 1, "start a 1 100.0 k", "ok a 1 110.0 k")  # pid 1 was cut off, then SIGTERMed
    keyed(cut, 2, "start b 1 106.0 k", "start c 1 106.5 k", "ok b 1 107.0 k", "ok c 1 107.0 k")
    assert overlaps(cut, [Abandoned(1, "sync", "partition", 1)]) == (2, [])
    late = tmp_path / "late"
    late.mkdir()
    keyed(late, 1, "start a 1 100.0 k", "fail a 1 102.0 k")  # a thread run past its time limit:
    keyed(late, 2, "start b 1 100.5 k", "start c 1 100.6 k", "ok b 1 101.0 k", "ok c 1 101.0 k")
    assert overlaps(late, [])[0] == 3 and len(overlaps(late, [])[1]) == 1  # its slot stays held


def test_a_cancelled_job_ends_cancelled_or_as_it_would_have_and_is_not_claimed_again() -> None:
    found = {"a": "cancelled", "b": "completed", "c": "failed", "d": "cancelled", "e": "completed"}
    cancels = {i: Cancel(True, 10.0) for i in "abcd"} | {"e": Cancel(False, 10.0)}
    runs = {"b": [["start", "b", "1", "1", "9.5"], ["ok", "b", "1", "1", "10.5"]],
            "d": [["start", "d", "1", "1", "10.2"], ["start", "d", "2", "2", "16.0"]]}  # fmt: skip
    problems = cancel_problems(cancels, found, {"c"}, runs)
    assert problems == ["d: attempts ['1', '2'] started after its cancel returned"]
    removed = {"f": Cancel(True, 10.0)}
    assert cancel_problems(removed, {"f": None}, set(), {"f": [["start", "f", "1", "1", "9.0"]]}) == []
    assert cancel_problems(removed, {"f": None}, set(), {"f": [["start", "f", "2", "1", "11.0"]]}) == [
        "f was removed by its cancel, yet attempt 2 started after it"
    ]
    assert cancel_problems(cancels, found, set(), {}) == [
        "c was cancelled and ended failed, expected completed or cancelled"
    ]
    assert cancel_problems({"a": Cancel(False, 10.0)}, found, set(), {}) == [
        "a: cancel answered False (already finished), yet it ended cancelled"
    ]


class FakeAdmin:
    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors

    def get_job(self, job_id: str) -> SimpleNamespace:
        return SimpleNamespace(error=self.errors[job_id])


def test_an_overtime_job_fails_by_its_limit_or_completes_from_a_run_never_stopped() -> None:
    found = {"a": "failed", "b": "completed", "c": "failed", "d": "completed"}
    runs = {"b": [["start", "b", "1", "1", "1.0"], ["ok", "b", "1", "1", "1.6"]],
            "d": [["start", "d", "1", "1", "1.0"], ["fail", "d", "1", "1", "1.3"]]}  # fmt: skip
    admin = FakeAdmin({"a": "timed out: the attempt exceeded its time limit of 0.3 s", "c": "boom"})
    completed, problems = overtime_outcomes(admin, list("abcd"), found, runs)  # type: ignore[arg-type]
    assert completed == {"b", "d"}
    assert problems == ["c (overtime) failed with 'boom', not by its time limit",
                        "d (overtime) completed, yet every run of it was stopped"]  # fmt: skip


class FakeResults:
    def __init__(self, results: dict[str, object]) -> None:
        self.results = results

    def result(self, job_id: str, timeout: float) -> object:
        value = self.results[job_id]
        if isinstance(value, Exception):
            raise value
        return value


def test_a_stored_result_says_how_its_job_ended_and_comes_from_a_returned_run() -> None:
    found = {"a": "completed", "b": "failed", "c": "cancelled", "d": None, "e": "completed", "f": "failed"}
    runs = {"a": [["start", "a", "2", "7", "1.0"], ["ok", "a", "2", "7", "1.1"]],
            "e": [["start", "e", "1", "7", "1.0"], ["ok", "e", "1", "7", "1.1"]]}  # fmt: skip
    admin = FakeResults({
        "a": {"attempt": 2, "pid": 7},
        "b": JobFailedError("b", "failed", "boom", 2),
        "c": JobCancelledError("c", "cancelled", "cancelled while running", 1),
        "d": JobCancelledError("d", "cancelled", "cancelled before it ran", 0),
        "e": {"attempt": 2, "pid": 7},  # another attempt's value
        "f": {"attempt": 1, "pid": 7},
    })  # fmt: skip
    problems = result_problems(admin, found, {"d"}, runs)  # type: ignore[arg-type]
    assert problems == [
        "e: result {'attempt': 2, 'pid': 7} is no run's return value ([('1', '7')])",
        "f: result {'attempt': 1, 'pid': 7} is no run's return value ([])",
        "f ended failed, yet its result says completed",
    ]
