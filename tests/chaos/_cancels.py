"""The chaos verdict's rules for jobs the producer cancelled (see `cancel_problems`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _producer import Cancel


def cancel_problems(cancels: dict[str, Cancel], found: dict[str, str | None], failing: set[str],
                    by_job: dict[str, list[list[str]]]) -> list[str]:  # fmt: skip
    """A cancelled job is removed (no record: it was waiting or delayed) or ends cancelled, or as
    it would have (completed; failed if `failing`) when it was running as the cancel came and
    finished first. A cancel answered False came after the job had finished, so it never ends
    cancelled. Once a cancel returned, no new attempt starts: no run of a removed job starts
    after it, and runs of another start in one attempt at most (a claim already in flight).
    Whether a job ended at all is the verdict's lost and stuck rules."""
    problems = []
    for job_id, cancel in cancels.items():
        state = found.get(job_id)
        finished = "failed" if job_id in failing else "completed"
        if state in ("completed", "failed") and state != finished:
            problems.append(f"{job_id} was cancelled and ended {state}, expected {finished} or cancelled")
        if state == "cancelled" and cancel.answer is False:
            problems.append(f"{job_id}: cancel answered False (already finished), yet it ended cancelled")
        later = {r[2] for r in by_job.get(job_id, []) if r[0] == "start" and float(r[4]) > cancel.at}
        if state is None and later and cancel.answer:
            problems.append(f"{job_id} was removed by its cancel, yet attempt {min(later)} started after it")
        elif len(later) > 1:
            problems.append(f"{job_id}: attempts {sorted(later)} started after its cancel returned")
    return problems
