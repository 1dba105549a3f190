"""The chaos verdict's check of concurrency limits: no more runs of a limit key at once than its
concurrency, except where a run had lost its lease (see `key_overlaps`)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from _stalls import Stall, explaining

if TYPE_CHECKING:
    from _chaos import ChaosConfig
    from _fleet import Abandoned


def key_overlaps(
    by_job: dict[str, list[list[str]]], stalls: list[Stall], abandoned: list[Abandoned], cfg: ChaosConfig
) -> tuple[int, list[str]]:
    """(the most runs of one key seen at once, a problem per time a key ran more than its
    concurrency). A run counts from its handler's start record to its end record, both inside the
    time the job held its key's slot (claim to ack), so an overlap seen here happened on the
    server too. Left out, as the documented at-least-once case: runs of workers SIGKILLed or cut
    off (their slot comes back with the lease while the run may go on), and runs during which
    their worker stalled long enough to lose the lease. Runs stopped by their time limit or a
    cancel count to their end: a thread runs on once its job is settled, and its slot stays held
    until it returns (production.md, Limits)."""
    lost_leases = {a.pid for a in abandoned}
    edges: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for job_id, records in by_job.items():
        for start in (r for r in records if r[0] == "start" and len(r) > 6 and r[6] != "-"):
            pid = int(start[3])
            end = next((r for r in records if r[0] != "start" and r[2:4] == start[2:4]), None)
            if end is None or pid in lost_leases:
                continue
            began, ended = float(start[4]), float(end[4])
            if explaining(stalls, pid, began, ended, cfg.lease) is None:
                edges[start[6]] += [(began, 1, job_id), (ended, -1, job_id)]
    most, problems = 0, []
    for key, points in edges.items():
        running: set[str] = set()
        for at, step, job_id in sorted(points, key=lambda p: (p[0], p[1])):  # ends before starts
            if step < 0:
                running.discard(job_id)
                continue
            running.add(job_id)
            most = max(most, len(running))
            if len(running) > cfg.key_concurrency:
                problems.append(f"limit key {key}: {len(running)} runs at once at {at:.3f} "
                                f"(concurrency {cfg.key_concurrency}): {sorted(running)}")  # fmt: skip
    return most, problems
