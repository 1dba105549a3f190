"""What one job costs each library, read off the server and the worker process: the "why"
behind a rate.

Per job, between two snapshots: commands the server executed (``total_commands_processed``,
which counts the script call and every command the script runs), reads it processed
(``total_reads_processed``: about one per round trip, a pipeline's commands arriving in one
read), server CPU, and the CPU of the producer or the worker process group. A process
case snapshots at its first and last completion (worker start-up excluded); an enqueue case
around the whole child call (its connection set-up and 5 warm-up calls are spread over
thousands of jobs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from bench.stats import summarize

Stats = Callable[[], dict[str, float]]
UNITS = {"commands": "commands/job", "reads": "reads/job", "server_cpu_us": "us/job",
         "client_cpu_us": "us/job"}


def server_stats(client_factory: Callable[[], Any]) -> Stats:
    """A snapshot function of the server's command, read and CPU counters."""
    def snapshot() -> dict[str, float]:
        client = client_factory()
        try:
            info = client.info("everything")
        finally:
            client.close()
        return {"commands": float(info["total_commands_processed"]),
                "reads": float(info.get("total_reads_processed", 0)),
                "server_cpu_us": 1e6 * (float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))}
    return snapshot


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live children (RQ forks workers)."""
    import psutil  # noqa: PLC0415 (the bench environment has it; children do not need it)

    total = 0.0
    with contextlib.suppress(psutil.NoSuchProcess):
        proc = psutil.Process(pid)
        for p in (proc, *proc.children(recursive=True)):
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total


def per_job(before: dict[str, float], after: dict[str, float], jobs: int) -> dict[str, float]:
    """Counter deltas divided by the jobs done between the two snapshots."""
    if jobs <= 0:
        return {}
    return {k: (after[k] - before[k]) / jobs for k in UNITS if k in before and k in after}


def metrics(samples: list[dict[str, float]]) -> dict[str, Any]:
    """``per_job_<name>`` metrics over repetitions (absent where a repetition lacked one)."""
    names = [k for k in UNITS if samples and all(k in s for s in samples)]
    return {f"per_job_{k}": summarize([s[k] for s in samples], UNITS[k]) for k in names}
