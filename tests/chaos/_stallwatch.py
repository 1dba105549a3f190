"""Stall watch for chaos worker processes: tells a blocked event loop from a starved process.

A daemon thread wakes every PERIOD seconds and (asyncio workers) posts a beat to the loop. A gap
between two loop beats longer than THRESHOLD is a stall of the loop; a late wake-up of the thread
itself is a stall of the whole process. Each stall is written to RUNS_DIR/<pid>.stalls, one line:

    loop|process <unix start> <seconds> cpu=<s> runq=<s> thread_late=<s> kernel=<samples> [at <frames>]
    clock <unix time> <seconds the wall clock stepped forward (negative: back)>

cpu and runq come from the main thread's /proc schedstat over the stall: time it ran, and time it
waited runnable for a CPU. runq close to the stall's length means the loop was ready but got no
CPU (starvation, no code of ours to blame); a loop stall with little cpu and runq means the main
thread slept in a blocking call (named by `at`, its stack sampled during the stall); much cpu
means it computed. `thread_late` is how late this thread woke: near the stall's length when the
whole process got no CPU (or the machine paused). `kernel` counts the main thread's state and
kernel wait channel sampled every PERIOD during a loop stall (R: runnable; S/D: asleep in the
named kernel function, D uninterruptible, as in a disk wait). A wall-clock step matters too: the
server measures leases on its clock (TIME), so a forward step shortens every lease at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from collections import Counter, deque
from pathlib import Path

PERIOD = 0.05
THRESHOLD = float(os.environ.get("CONVEYOR_STALL_THRESHOLD", "1.0"))  # seconds
CLOCK_STEP = 0.5  # seconds the wall clock may drift from the monotonic one in one PERIOD


def schedstat(native_id: int) -> tuple[float, float]:
    """(seconds on CPU, seconds waiting runnable on a run queue) of one thread; zeros if unknown."""
    try:
        fields = Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()
    except OSError:
        return 0.0, 0.0
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def kernel_state(native_id: int) -> str:
    """state/wait channel of one thread, as "S/hrtimer_nanosleep" ("?" if unknown)."""
    task = Path(f"/proc/self/task/{native_id}")
    try:
        state = task.joinpath("stat").read_text().rpartition(")")[2].split()[0]
        return f"{state}/{task.joinpath('wchan').read_text().strip() or '-'}"
    except (OSError, IndexError):
        return "?"


def frames(thread_id: int) -> str:
    """The innermost frames of a thread, shortest form: file:line function, innermost last."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return "?"
    stack = traceback.extract_stack(frame)[-6:]
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(stack))


class StallWatch:
    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.path, self.loop = path, loop
        self.main = threading.main_thread()
        self.tid = self.main.native_id or 0
        self.beat = time.monotonic()
        self.stalls: list[str] = []
        self.kernel: Counter[str] = Counter()
        self.naps: deque[tuple[float, float]] = deque(maxlen=64)  # this thread's late wake-ups
        threading.Thread(target=self._watch, daemon=True, name="stall-watch").start()

    def _mark(self) -> None:
        self.beat = time.monotonic()

    def _late_within(self, start: float, end: float) -> float:
        """Seconds between `start` and `end` (monotonic) this thread overslept: the whole process
        got no CPU then (its own late wake-up may come just before or after the loop's)."""
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.naps)

    def _record(self, kind: str, began: float, seconds: float, sched0: tuple[float, float],
                stack: str | None) -> None:  # fmt: skip
        late = self._late_within(began, began + seconds)
        (cpu_now, runq_now), (cpu0, runq0) = schedstat(self.tid), sched0
        cpu, runq = cpu_now - cpu0, runq_now - runq0
        wall = time.time() - (time.monotonic() - began)
        line = f"{kind} {wall:.3f} {seconds:.2f} cpu={cpu:.2f} runq={runq:.2f} thread_late={late:.2f}"
        line += " kernel=" + (",".join(f"{k}:{n}" for k, n in self.kernel.most_common(4)) or "-")
        line += f" at {stack}" if stack else ""
        self._write(line)

    def _write(self, line: str) -> None:
        self.stalls.append(line)
        with self.path.open("a") as out:
            out.write(line + "\n")
        print(f"{os.getpid()} stall: {line}", file=sys.stderr, flush=True)

    def _watch(self) -> None:
        main_id = self.main.ident or 0
        seen, sched, stack = self.beat, schedstat(self.tid), None
        woke, wall = time.monotonic(), time.time()
        while True:
            time.sleep(PERIOD)
            now = time.monotonic()
            step, wall = time.time() - wall - (now - woke), time.time()
            if abs(step) > CLOCK_STEP:
                self._write(f"clock {wall:.3f} {step:.2f}")
            if now - woke - PERIOD > PERIOD:
                self.naps.append((woke + PERIOD, now))
            late, woke = now - woke - PERIOD, now
            if self.loop is None:  # a thread worker: only the process can stall
                if late > THRESHOLD:
                    self._record("process", now - late, late, sched, None)
                sched = schedstat(self.tid)
                continue
            if self.beat != seen:  # the loop ran since the last look
                gap = self.beat - seen
                if gap > THRESHOLD:
                    self._record("loop", seen, gap, sched, stack)
                seen, sched, stack = self.beat, schedstat(self.tid), None
                self.kernel.clear()
            elif now - seen > THRESHOLD / 2:
                self.kernel[kernel_state(self.tid)] += 1
                stack = stack or frames(main_id)
            try:
                self.loop.call_soon_threadsafe(self._mark)
            except RuntimeError:  # the loop is closed: the worker is ending
                return
