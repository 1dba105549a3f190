"""The chaos verdict's rules for stored results (see `result_problems`)."""

from __future__ import annotations

from conveyor import JobCancelledError, JobFailedError, Queue


def result_problems(admin: Queue, found: dict[str, str | None], removed: set[str],
                    by_job: dict[str, list[list[str]]]) -> list[str]:  # fmt: skip
    """Every finished job's stored result says how it ended: a completed job's value is what one
    of its runs returned unstopped (the handler returns its attempt and pid, matched against the
    "ok" run records), a failed job's raises JobFailedError, a cancelled or removed one's
    JobCancelledError. A result lost, or taken from another attempt, is a problem."""
    problems = []
    for job_id, state in found.items():
        expected = "cancelled" if job_id in removed else state
        if expected not in ("completed", "failed", "cancelled"):
            continue
        try:
            value = admin.result(job_id, timeout=0)
        except JobCancelledError:
            got = "cancelled"
        except JobFailedError:
            got = "failed"
        except Exception as exc:  # any other answer is the problem reported
            problems.append(f"{job_id} ended {expected}, yet its result raised {exc!r}")
            continue
        else:
            got = "completed"
            returned = {(r[2], r[3]) for r in by_job.get(job_id, []) if r[0] == "ok"}
            run = (str(value.get("attempt")), str(value.get("pid"))) if isinstance(value, dict) else None
            if run not in returned:
                problems.append(f"{job_id}: result {value!r} is no run's return value ({sorted(returned)})")
        if got != expected:
            problems.append(f"{job_id} ended {expected}, yet its result says {got}")
    return problems
