"""Stalls of chaos worker processes (recorded by _stallwatch.py) and what they explain.

A worker whose loop (or whole process) does not run for longer than the lease minus one heartbeat
interval can lose a lease under a running job: the job is then redelivered and runs again, the
documented at-least-once case. The verdict accepts such a repeat only when the stall came from
outside the worker's code:

- frozen: the stall watch's own thread woke late by most of the stall (the process or machine
  got no CPU at all);
- starved: of the stall's parts (computing `cpu`, waiting runnable for a CPU `runq`, asleep: the
  rest), waiting for a CPU is the largest;
- io: asleep is the largest, and uninterruptibly (state D, a disk wait) in most samples;
- clock: the wall clock stepped forward (the server's TIME, which leases are measured on, with it).

Anything else (the loop computing, or asleep in a blocking call) is `blocked`: a defect to fix,
reported as a problem with the stack it was blocked in when the loop's own part (computing and
asleep, without the wait for a CPU) reaches a third of the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stall:
    pid: int
    scope: str  # "loop", "process" or "clock"
    began: float  # unix time
    seconds: float
    fields: dict[str, str]
    line: str

    @property
    def ended(self) -> float:
        return self.began + self.seconds

    def _seconds(self, name: str) -> float:
        try:
            return float(self.fields.get(name, "0"))
        except ValueError:
            return 0.0

    @property
    def own_seconds(self) -> float:
        """How long the loop itself held up (computing or asleep), without the wait for a CPU."""
        return max(0.0, self.seconds - self._seconds("runq"))

    @property
    def cause(self) -> str:
        """frozen, starved, io, clock or blocked (see the module docstring)."""
        if self.scope == "clock":
            return "clock"
        if self.scope == "process" or self._seconds("thread_late") >= self.seconds / 2:
            return "frozen"
        cpu, runq = self._seconds("cpu"), self._seconds("runq")
        asleep = self.seconds - cpu - runq
        if runq >= max(cpu, asleep):
            return "starved"
        samples = [kv.rpartition(":") for kv in self.fields.get("kernel", "").split(",") if ":" in kv]
        counts = {state: int(n) for state, _, n in samples if n.isdigit()}
        in_d = sum(n for k, n in counts.items() if k.startswith("D/"))
        return "io" if asleep >= cpu and counts and in_d * 2 >= sum(counts.values()) else "blocked"

    def overlaps(self, start: float, end: float) -> bool:
        return self.began < end and self.ended > start


def parse(pid: int, line: str) -> Stall | None:
    scope, began, seconds, *rest = line.split(" at ", 1)[0].split()
    fields = dict(item.split("=", 1) for item in rest if "=" in item)
    try:
        return Stall(pid, scope, float(began), float(seconds), fields, line.strip())
    except ValueError:
        return None


def read_stalls(runs_dir: Path) -> list[Stall]:
    """Every stall recorded in RUNS_DIR/<pid>.stalls."""
    out = []
    for path in sorted(runs_dir.glob("*.stalls")):
        pid = int(path.stem)
        out += [s for line in path.read_text().splitlines() if line.strip() and (s := parse(pid, line))]
    return out


def explaining(stalls: list[Stall], pid: int, start: float, end: float, lease: float) -> Stall | None:
    """A stall of `pid` between `start` and `end` long enough to cost a lease (over two thirds of
    it: heartbeats come every third), caused from outside the worker's code; None if none."""
    for stall in stalls:
        long_enough = stall.seconds >= lease * 2 / 3
        if stall.pid == pid and long_enough and stall.cause != "blocked" and stall.overlaps(start, end):
            return stall
    return None


def blocked(stalls: list[Stall], lease: float) -> list[str]:
    """Loop stalls that nothing outside the worker explains, whose own part is a third of the
    lease or more: defects."""
    return [f"pid {s.pid}: event loop blocked {s.seconds:.1f} s: {s.line}" for s in stalls
            if s.cause == "blocked" and s.own_seconds >= lease / 3]  # fmt: skip
