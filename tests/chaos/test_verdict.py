"""The chaos verdict's rules on hand-written run records (no server): what counts as a repeat run,
which repeats a killed or cut-off worker explains, and attempts spent without a run."""

from __future__ import annotations

from pathlib import Path

from _chaos import ChaosConfig
from _fleet import Abandoned, open_runs, remaining_work
from _verdict import grew, memory_growth, repeats

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
