"""The end of a chaos run: what happened to every job, every run and every signalled worker.

Rules (issue 7): no job lost, none stuck, none failed that should not have, re-enqueued ids created
nothing, every SIGTERMed worker exited within its deadline, and a job ran again only after the
worker running it was SIGKILLed or SIGTERMed while cut off from the server (at most that worker's
capacity of repeats per such worker).
A run that follows a run ended by the handler's own failure is a retry, not a repeat. A repeat
after the previous run's worker stalled (no CPU, a frozen process, a disk wait: see _stalls.py)
for long enough to lose the lease is the documented at-least-once case: counted apart, not a
problem; a worker loop blocked by code is a problem whether or not a job ran again.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from _fleet import Fleet, read_runs
from _job_ends import job_ends
from _key_limits import key_overlaps
from _stalls import blocked, explaining, read_stalls
from conveyor import ConveyorError, Queue

from bench.servers import RunningServer

if TYPE_CHECKING:
    from _chaos import ChaosConfig, Faults
    from _producer import Plan

MEMORY_SLACK = 256 * 1024  # bytes the soak's late mean may exceed its early mean by (plus 5%)
SUMMARIES: list[str] = []  # one line per run, printed at the end of the session (conftest)


@dataclass
class Verdict:
    summary: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    fault_log: list[str] = field(default_factory=list)

    def report(self) -> str:
        s = self.summary
        faults = ", ".join(f"{k} {v}" for k, v in s["faults"].items())
        return (
            f"{s['server']}: {s['seconds']:.0f} s, faults [{faults}], jobs {s['jobs']} "
            f"({s['by_kind']}), runs {s['runs']}, attempts spent without a run {s['attempts_without_run']}, "
            f"overtime jobs completed {s['overtime_completed']}, "
            f"cancels {s['cancels']} ({s['removed']} removed, {s['ended_cancelled']} ended cancelled), "
            f"limited jobs {s['limited_jobs']} (most runs of a key at once {s['most_runs_per_key']}), "
            f"duplicate runs {s['duplicate_runs']} "
            f"(bound {s['duplicate_bound']}, runs open at kills/partitions {s['open_at_kills']}), "
            f"repeats after stalled workers {s['stall_repeats']} (stalls recorded {s['stalls']}), "
            f"lost {s['lost']}, stuck {s['stuck']}, wrongly failed {s['wrongly_failed']}, "
            f"re-enqueue created {s['reenqueue_created']}, slowest SIGTERM exit "
            f"{s['slowest_term_exit']:.1f} s of {s['term_deadline']:.0f} s"
            + (f", memory {s['memory']}" if s.get("memory") else "")
            + (f", disabled faults {s['disabled_faults']}" if s.get("disabled_faults") else "")
        )


def sample_memory(server: RunningServer, out: list[tuple[float, int]], stop: threading.Event) -> None:
    """used_memory every second through a direct connection; gaps while the server restarts."""
    began = time.monotonic()
    while not stop.wait(1.0):
        with contextlib.suppress(redis.RedisError, OSError), server.client(socket_timeout=5) as c:
            out.append((time.monotonic() - began, int(c.info("memory")["used_memory"])))


@dataclass
class Repeats:
    total: int  # runs that followed a run not ended by the handler's own failure
    bound: int  # what killed or cut-off workers can explain
    skipped: int  # attempts spent without a run
    unexplained: list[str]
    by_job: dict[str, list[list[str]]]
    after_stalls: list[str]  # repeats a stall of the previous run's worker explains


def repeats(fleet: Fleet, cfg: ChaosConfig) -> Repeats:
    """Repeat runs and attempts spent without a run, from every process's run record."""
    by_job: dict[str, list[list[str]]] = defaultdict(list)
    for path in fleet.runs_dir.glob("*.runs"):
        for record in read_runs(path):
            by_job[record[1]].append(record)
    killed = {k.pid: k for k in fleet.abandoned}
    stalls = read_stalls(fleet.runs_dir)
    after_stalls: list[str] = []
    stalled: Counter[int] = Counter()
    per_pid: Counter[int] = Counter()
    unexplained: list[str] = []
    total = skipped = 0
    for job_id, records in by_job.items():
        records.sort(key=lambda r: float(r[4]))
        runs = [r for r in records if r[0] == "start"]
        numbers = [0, *sorted(int(r[2]) for r in runs)]
        skipped += sum(max(0, b - a - 1) for a, b in itertools.pairwise(numbers))
        for prev, run in itertools.pairwise(runs):
            prev_pid = int(prev[3])
            ended = [r[0] for r in records if r[3] == prev[3] and r[2] == prev[2] and r[0] != "start"]
            if ended == ["fail"]:
                continue  # the handler failed: a retry, as asked for
            total += 1
            stall = explaining(stalls, prev_pid, float(prev[4]), float(run[4]), cfg.lease)
            if prev_pid in killed:
                per_pid[prev_pid] += 1
            elif stall is not None:
                stalled[prev_pid] += 1
                after_stalls.append(f"{job_id} attempt {prev[2]} in pid {prev_pid}: {stall.cause}: "
                                    f"{stall.line}")  # fmt: skip
            else:
                unexplained.append(f"{job_id} ran again (attempt {run[2]} in pid {run[3]}) after "
                                   f"attempt {prev[2]} in pid {prev_pid}, neither killed nor cut off "
                                   f"(that run ended: {ended or 'never'})")  # fmt: skip
    bound = sum(cfg.capacity(k.mode) for k in fleet.abandoned)
    # A killed worker may also have held claimed jobs it had not started: their attempt is spent
    # without a run. Anything beyond that is a claim whose reply was lost (orphaned jobs).
    unstarted = sum(cfg.capacity(k.mode) - k.open_runs for k in fleet.abandoned)
    if skipped > unstarted:
        unexplained.append(f"{skipped} attempts were spent without a run; killed workers can "
                           f"explain at most {unstarted} (claimed, not yet started)")  # fmt: skip
    for pid, n in per_pid.items():
        if n > cfg.capacity(killed[pid].mode):
            unexplained.append(f"pid {pid} ({killed[pid].mode}, {killed[pid].how}) held at most "
                               f"{cfg.capacity(killed[pid].mode)} jobs, yet {n} ran again")  # fmt: skip
    modes = {p.pid: p.mode for p in getattr(fleet, "procs", [])}
    for pid, n in stalled.items():
        most = cfg.capacity(modes[pid]) if pid in modes else max(cfg.capacity("sync"), cfg.capacity("async"))
        if n > most:
            unexplained.append(f"pid {pid} stalled holding at most {most} jobs, yet {n} ran again")
    unexplained += blocked(stalls, cfg.lease)
    return Repeats(total, bound, skipped, unexplained, by_job, after_stalls)


def memory_growth(memory: list[tuple[float, int]]) -> dict[str, int] | None:
    """Mean used_memory of the first and the last quarter of the run after a warm-up of 40%
    (retention sets fill up first). Means, not peaks: a claim reply in flight or a restart moves
    single samples; a leak moves them all."""
    if len(memory) < 40:
        return None
    end = memory[-1][0]
    warm = [m for t, m in memory if t >= 0.4 * end]
    quarter = max(1, len(warm) // 4)
    return {"early_mean": sum(warm[:quarter]) // quarter, "late_mean": sum(warm[-quarter:]) // quarter}


def grew(growth: dict[str, int]) -> bool:
    return growth["late_mean"] > growth["early_mean"] * 1.05 + MEMORY_SLACK


def judge(admin: Queue, cfg: ChaosConfig, plan: Plan, fleet: Fleet, faults: Faults,
          memory: list[tuple[float, int]], *, drained: dict[str, int], crashed: list[str],
          seconds: float) -> Verdict:  # fmt: skip
    ids = sorted(plan.enqueued)
    rep, stalls = repeats(fleet, cfg), read_stalls(fleet.runs_dir)
    by_job = rep.by_job
    ends = job_ends(admin, cfg, plan, by_job)
    problems = list(ends.problems)
    never_ran = [i for i in ids if i not in by_job and i not in ends.cancelled]
    no_success = [i for i in ids if i not in ends.expect_fail | ends.cancelled
                  and not any(r[0] == "ok" for r in by_job.get(i, []))]  # fmt: skip
    problems += [f"lost: {x}" for x in ends.lost[:10]] + [f"stuck: {x}" for x in ends.stuck[:10]]
    problems += describe_stuck(admin) if ends.stuck else []
    problems += [f"never ran: {', '.join(never_ran[:10])}"] if never_ran else []
    problems += [f"completed without a successful run: {', '.join(no_success[:10])}"] if no_success else []
    problems += rep.unexplained[:20]
    most_per_key, over_limit = key_overlaps(by_job, stalls, fleet.abandoned, cfg)
    problems += over_limit[:10]
    problems += [f"re-enqueue created {i}" for i in plan.reenqueue_created[:10]]
    problems += [f"producer gave up: {x}" for x in plan.gave_up[:10]]
    problems += [f"worker crashed: {c}" for c in crashed]
    problems += term_exit_problems(fleet, cfg)
    growth = memory_growth(memory) if cfg.jobs is None else None
    if growth and grew(growth):
        problems.append(f"server memory grew: {growth}")
    summary = {
        "server": f"{admin_server(admin)}", "seconds": seconds, "seed": cfg.seed,
        "faults": {k: v for k, v in faults.count.items()}, "disabled_faults": list(cfg.disabled_faults),
        "jobs": len(ids), "by_kind": dict(Counter(plan.kinds[i] for i in ids)),
        "runs": sum(1 for rs in by_job.values() for r in rs if r[0] == "start"),
        "duplicate_runs": rep.total, "duplicate_bound": rep.bound, "stall_repeats": len(rep.after_stalls),
        "stalls": len(stalls), "attempts_without_run": rep.skipped,
        "open_at_kills": sum(k.open_runs for k in fleet.abandoned),
        "overtime_completed": len(ends.returned), "cancels": len(plan.cancels), "removed": len(ends.removed),
        "ended_cancelled": len(ends.cancelled - ends.removed),
        "most_runs_per_key": most_per_key, "limited_jobs": sum(1 for i in ids if plan.keys.get(i)),
        "lost": len(ends.lost), "stuck": len(ends.stuck), "wrongly_failed": len(ends.wrong),
        "reenqueue_created": len(plan.reenqueue_created), "producer_retried_calls": plan.failed_calls,
        "term_exits": len(fleet.term_exits), "term_deadline": cfg.shutdown_timeout + cfg.exit_grace,
        "slowest_term_exit": max((t.seconds for t in fleet.term_exits), default=0.0),
        "drained_counts": drained, "memory": growth,
    }  # fmt: skip
    # Every stall of every process, so a stall of one worker can be told from one of the machine.
    notes = [f"stall of pid {x.pid} ({x.cause}): {x.line}" for x in stalls]
    notes += [f"repeat after a stall: {x}" for x in rep.after_stalls]
    return Verdict(summary, problems, faults.log + notes)


def term_exit_problems(fleet: Fleet, cfg: ChaosConfig) -> list[str]:
    """Every SIGTERMed worker exits with code 0 within its shutdown deadline (plus a grace)."""
    deadline = cfg.shutdown_timeout + cfg.exit_grace
    return [f"SIGTERMed {t.mode} pid {t.pid}: exit {t.returncode} after {t.seconds:.1f} s "
            f"(deadline {deadline:.0f} s)"
            for t in fleet.term_exits if t.seconds > deadline or t.returncode != 0]  # fmt: skip


def describe_stuck(admin: Queue) -> list[str]:
    """A few jobs of each unfinished state with their fields (payload left out), for diagnosis."""
    k, c = admin.core.keys, admin.client
    now = c.time()
    out = [f"server time {int(now[0]) * 1000 + int(now[1]) // 1000} ms"]
    found = {
        "waiting": [(i, None) for i in c.lrange(k.waiting, -10, -1)],
        "delayed": c.zrange(k.delayed, 0, 9, withscores=True),
        "active": c.zrange(k.active, 0, 9, withscores=True),
    }
    for state, members in found.items():
        for raw_id, score in members:
            job_id = raw_id.decode()
            raw = c.hgetall(k.job(job_id))
            fields = {f.decode(): v.decode(errors="replace")[:80] for f, v in raw.items() if f != b"d"}
            out.append(f"  {state} {job_id} score {score}: {fields}")
    return out


def admin_server(admin: Queue) -> str:
    with contextlib.suppress(redis.RedisError, ConveyorError):
        info = admin.client.info("server")
        return f"{info.get('server_name', 'redis')}-{info.get('valkey_version') or info['redis_version']}"
    return "?"
