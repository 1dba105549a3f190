"""The chaos verdict's rules for "overtime" jobs, whose handler runs past the job's time limit."""

from __future__ import annotations

from conveyor import Queue


def overtime_outcomes(admin: Queue, overtime: list[str], found: dict[str, str | None],
                      by_job: dict[str, list[list[str]]]) -> tuple[set[str], list[str]]:  # fmt: skip
    """(the overtime jobs that completed, problems). An attempt past its limit is stopped: failed
    with the time limit's error once attempts run out. A handler that returned before its worker
    stopped it has completed (production.md, Time limits: a thread's limit is checked every
    maintenance tick, and a task that returned is never failed for its limit), so a completed
    job must have a run recorded as returning unstopped ("ok")."""
    completed, problems = set(), []
    for job_id in overtime:
        if found.get(job_id) == "completed":
            completed.add(job_id)
            if not any(r[0] == "ok" for r in by_job.get(job_id, [])):
                problems.append(f"{job_id} (overtime) completed, yet every run of it was stopped")
        elif found.get(job_id) == "failed":
            error = getattr(admin.get_job(job_id), "error", None) or ""
            if not error.startswith("timed out"):
                problems.append(f"{job_id} (overtime) failed with {error!r}, not by its time limit")
    return completed, problems
