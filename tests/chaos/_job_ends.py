"""The chaos verdict's reading of how every job ended (see _verdict.py): lost, stuck, wrongly
failed, cancelled or removed by a cancel, and the totals the queue counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from _cancels import cancel_problems
from _results_check import result_problems
from _time_limits import overtime_outcomes

if TYPE_CHECKING:
    from _chaos import ChaosConfig
    from _producer import Plan
    from conveyor import Queue

TERMINAL = {"completed", "failed"}
FAILING = ("doomed", "overtime")  # job kinds whose every attempt fails: they must end failed
Runs = dict[str, list[list[str]]]  # job id -> its run records (_verdict.repeats)


@dataclass
class Ends:
    expect_fail: set[str]  # jobs that must end failed
    lost: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # failed that should not have, or the reverse
    cancelled: set[str] = field(default_factory=set)  # removed by a cancel, or ended cancelled
    removed: set[str] = field(default_factory=set)
    returned: set[str] = field(default_factory=set)  # overtime jobs completed by a run never stopped
    problems: list[str] = field(default_factory=list)


def job_ends(admin: Queue, cfg: ChaosConfig, plan: Plan, by_job: Runs) -> Ends:
    """Each job's end where finished jobs are kept (each is read), else the queue's counts."""
    ids = sorted(plan.enqueued)
    ends = Ends({i for i in ids if plan.kinds[i] in FAILING})
    counts = admin.counts()
    retained = cfg.keep_completed == -1
    if retained:
        _read_each(admin, plan, ids, by_job, ends)
    else:
        busy = counts["waiting"] + counts["delayed"] + counts["active"]
        ends.stuck = [f"{busy} jobs still waiting, delayed or active"] if busy else []
    cancelled, expect_fail = ends.cancelled, ends.expect_fail
    want = (len(ids) - len(expect_fail - cancelled) - len(cancelled), len(expect_fail - cancelled))
    got = (counts["total_completed"], counts["total_failed"])
    if got != want:
        ends.problems.append(f"(completed, failed) totals are {got}, expected {want}")
        if not retained and sum(got) < sum(want):
            ends.lost.append(f"{sum(want) - sum(got)} jobs never finished")
    return ends


def _read_each(admin: Queue, plan: Plan, ids: list[str], by_job: Runs, ends: Ends) -> None:
    found = states(admin, ids)
    overtime = [i for i in ids if plan.kinds[i] == "overtime"]
    ends.returned, late = overtime_outcomes(admin, overtime, found, by_job)
    ends.problems += late[:10]
    ends.expect_fail -= ends.returned
    # cancel() deletes a waiting or delayed job: gone, not lost (unless it said "finished")
    ends.removed = {i for i, c in plan.cancels.items() if found[i] is None and c.answer is not False}
    ends.lost = [i for i, s in found.items() if s is None and i not in ends.removed]
    final = {i: TERMINAL | ({"cancelled"} if i in plan.cancels else set()) for i in ids}
    ends.stuck = [f"{i}: {s}" for i, s in found.items() if s is not None and s not in final[i]]
    ends.wrong = [i for i, s in found.items() if (s == "failed") != (i in ends.expect_fail)
                  and s in TERMINAL and i not in plan.cancels]  # fmt: skip
    ends.problems += cancel_problems(plan.cancels, found, ends.expect_fail, by_job)[:10]
    ends.cancelled = ends.removed | {i for i, s in found.items() if s == "cancelled"}
    ends.problems += result_problems(admin, found, ends.removed, by_job)[:10]
    for job_id in ends.wrong[:5]:
        job = admin.get_job(job_id)
        end = f"{job and job.state}: {job and job.error}"
        ends.problems.append(f"{job_id} ({plan.kinds[job_id]}) ended {end}")


def states(admin: Queue, ids: list[str]) -> dict[str, str | None]:
    """State of each id (None: no such job) with pipelined HGETs on a direct connection."""
    out: dict[str, str | None] = {}
    names = {"w": "waiting", "d": "delayed", "a": "active", "c": "completed", "f": "failed", "C": "cancelled"}
    for i in range(0, len(ids), 1000):
        chunk = ids[i : i + 1000]
        pipe = admin.client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.hget(admin.core.keys.job(job_id), "s")
        for job_id, raw in zip(chunk, pipe.execute(), strict=True):
            out[job_id] = None if raw is None else names.get(raw.decode(), raw.decode())
    return out
