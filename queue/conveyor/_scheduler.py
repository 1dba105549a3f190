"""Scheduler: enqueues the jobs of an app's periodic schedules; any number may run at once.

Each tick reads every schedule's stored next fire time and its mark (one HMGET per queue) and, for
a schedule that is new, due or redefined, runs the ``fire`` script: a compare-and-set of both that
also creates the fire time's job (id ``cron:<name>:<fire ms>``). Competing schedulers therefore
enqueue each fire time exactly once. Fire times come from each scheduler's own clock: keep hosts in
NTP sync.

The mark of schedule ``name`` is the field ``name{`` of the same hash (a name never holds '{'):
``<fingerprint>:<next fire ms>:<floor ms>`` (``Schedule.decide``). It is valid only while its next
fire time is the stored one: an earlier version writes the plain next fire time alone, and the
stale mark then no longer counts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from ._ops import Call, QueueCore, delay_ms_of
from ._replies import text
from ._schedule import Schedule
from ._scripts import Scripts
from ._worker_errors import FATAL, RECOVERABLE

if TYPE_CHECKING:
    from ._app import Conveyor

FIRED = 1
log = logging.getLogger("conveyor.scheduler")


def mark_field(name: str) -> str:
    """The hash field of a schedule's mark."""
    return name + "{"


def read_mark(mark: str | None, stored: int | None) -> tuple[str | None, int]:
    """(fingerprint of the definition that stored ``stored``, floor), or (None, 0) when unknown."""
    parts = (mark or "").split(":")
    if stored is None or len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None, 0
    if int(parts[1]) != stored:  # stale: an earlier version stored the time since
        return None, 0
    return parts[0], int(parts[2])


def fire_call(
    core: QueueCore,
    schedule: Schedule,
    stored: int | None,
    new_next: int,
    fire: int | None,
    *,
    mark: str | None = None,
    new_mark: str = "",
) -> Call[int]:
    """The ``fire`` script call: advance ``schedule`` from ``stored`` (with ``mark``, as read) to
    ``new_next`` (with ``new_mark``), maybe enqueue."""
    job: list[object] = ["", "", "", "", 0, 0, "", 0]
    if fire is not None:
        packed = core.pack(
            schedule.task,
            schedule.payload,
            schedule.job_id(fire),
            schedule.delay,
            schedule.max_attempts,
            priority=schedule.priority,
            time_limit=schedule.time_limit,
            limit=schedule.limit,
        )
        # id, task, payload, max attempts, time limit, priority, key limit (validated, encoded),
        # delay ms
        job = [*packed[:4], packed[6], packed[5], packed[7], delay_ms_of(schedule.delay)]
    k = core.keys
    args = [schedule.name, "" if stored is None else str(stored), str(new_next), *job[:7], mark or "",
            new_mark, job[7]]  # fmt: skip
    return Call(Scripts.FIRE.value, (k.schedules, k.waiting, k.marker, k.jobs, k.delayed), args, int)


class Scheduler:
    """Fires the schedules of ``app``; ``run()`` ticks at each fire time and at least every
    ``interval`` seconds, until stopped."""

    def __init__(self, app: Conveyor, interval: float = 1.0) -> None:
        if not interval > 0:
            raise ValueError(f"scheduler interval must be > 0 seconds, got {interval!r}")
        self.app, self.interval = app, interval
        self._stop = threading.Event()
        self._next_fire_ms: int | None = None  # the earliest next fire time the last tick saw
        self._refused: set[str] = set()  # queues of another data layout: their schedules never fire

    def stop(self) -> None:
        self._stop.set()

    def tick(self, now: float | None = None) -> list[str]:
        """Fire what is due at ``now`` (seconds since the epoch; default: this host's clock).

        Returns the ids of the jobs this call created (those another scheduler created are not).
        """
        now_ms = round((time.time() if now is None else now) * 1000)
        self._next_fire_ms = None  # a failed tick leaves none: run() then waits the interval
        coming: list[int] = []
        by_queue: dict[str, list[Schedule]] = defaultdict(list)
        for schedule in self.app.schedules.values():
            by_queue[schedule.queue].append(schedule)
        created: list[str] = []
        for queue_name, schedules in by_queue.items():
            if queue_name in self._refused:
                continue
            queue = self.app.queue(queue_name)
            fields = [f for s in schedules for f in (s.name, mark_field(s.name))]
            stored = queue.client.hmget(queue.core.keys.schedules, fields)
            for i, schedule in enumerate(schedules):
                value, raw_mark = stored[2 * i], stored[2 * i + 1]
                previous = None if value is None else int(text(value))
                mark = None if raw_mark is None else text(raw_mark)
                try:  # one schedule's failure must not stop the others (a server error does)
                    writer, floor = read_mark(mark, previous)
                    new_next, fire, new_floor = schedule.decide(previous, now_ms, writer, floor)
                    new_mark = f"{schedule.fingerprint()}:{new_next}:{new_floor}"
                    call = fire_call(
                        queue.core, schedule, previous, new_next, fire, mark=mark, new_mark=new_mark
                    )
                except Exception as exc:
                    log.error(
                        "schedule %r skipped at this tick: %s: %s", schedule.name, type(exc).__name__, exc
                    )
                    continue
                if new_next > now_ms:
                    coming.append(new_next)
                if previous is not None and new_next == previous:
                    continue  # not due: no script call
                try:
                    fired = queue._run(call)
                except FATAL as exc:  # a queue of another layout: the other queues' schedules go on
                    self._refuse(queue_name, exc)
                    break
                if fired == FIRED:
                    assert fire is not None
                    created.append(schedule.job_id(fire))
        self._next_fire_ms = min(coming, default=None)
        return created

    def _refuse(self, queue_name: str, exc: Exception) -> None:
        """Skip a queue's schedules from now on, said once: no retry can fix its layout, and
        failing the tick (as a lost server does) kept every queue after it from firing."""
        self._refused.add(queue_name)
        log.error("schedules of queue %r skipped from now on (no retry can fix it): %s", queue_name, exc)

    def _pause(self) -> float:
        """Seconds until the next tick: the interval, or less when a fire time comes sooner. A tick
        fires a schedule's latest due time only, so ticking once per interval lost the fire times
        between two ticks (every=0.2 fired once a second)."""
        if self._next_fire_ms is None:
            return self.interval
        until = self._next_fire_ms / 1000 - time.time()
        return min(self.interval, max(until, 0.0) + 0.001)  # + 1 ms: wake at or after the fire time

    def run(self) -> None:
        """Tick until ``stop()``; a lost server is logged and retried on the next tick."""
        log.info("scheduler running %d schedule(s)", len(self.app.schedules))
        while not self._stop.is_set():
            try:
                for job_id in self.tick():
                    log.info("scheduled job %s enqueued", job_id)
            except RECOVERABLE as exc:
                log.warning("scheduler tick failed (%s); will retry", exc)
            except Exception:  # never end the thread silently while the worker runs on
                log.exception("scheduler tick failed; will retry")
            self._stop.wait(self._pause())
