"""Limit-key slots a worker holds for its stopped handlers that still run (no I/O here).

A thread cannot be interrupted: a handler stopped by its time limit or a cancel is settled at
once (failed or cancelled), yet runs until it returns. Its fail keeps its key's slot taken, held
on the server (fail.lua, hold_slot): freed at that moment, the key's next job started beside the
stopped one, over the key's concurrency. The worker renews each hold like a lease while the
handler runs, and ends it when the handler returns (_lua/hold.lua); a hold its worker stops
renewing (it died, stalled or stopped first) is freed by lease recovery one lease later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ._models import Job
from ._ops import MAX_BATCH
from ._worker_errors import log


@dataclass
class SlotHolds:
    lease: float
    held: dict[str, tuple[Job, float]] = field(default_factory=dict)  # member -> (job, last renewal)
    ending: list[str] = field(default_factory=list)  # members whose handler returned: to end

    def on_held(self, job: Job, running: bool) -> None:
        """A fail held ``job``'s slot (``job._held_slot``); ``running``: its handler still runs
        (else it returned while the fail was on its way, and the hold ends at once)."""
        member = job._held_slot
        if member is None:
            return
        if running:
            self.held[member] = (job, time.monotonic())
        else:
            self.ending.append(member)

    def on_returned(self, job: Job) -> None:
        """A stopped job's handler returned: its held slot (if its fail held one) is to be ended."""
        member = job._held_slot
        if member is not None and self.held.pop(member, None) is not None:
            self.ending.append(member)

    def plan(self, tick: float, runs_on: Callable[[Job], bool]) -> tuple[list[str], list[str]]:
        """The holds a maintenance tick renews and those it ends (their handler returned: reported,
        or found by ``runs_on``, as an asyncio worker's task thread is)."""
        for job, _ in list(self.held.values()):
            if not runs_on(job):
                self.on_returned(job)
        return self.due(tick), self.ending[:MAX_BATCH]

    def on_answered(self, renew: Sequence[str], end: Sequence[str], statuses: Sequence[int]) -> None:
        """hold.lua answered ``statuses`` for ``renew`` then ``end``."""
        self.on_renewed(renew, statuses[: len(renew)])
        del self.ending[: len(end)]

    def due(self, tick: float) -> list[str]:
        """Holds that would reach a third of a lease before the next tick (as leases are renewed)."""
        cutoff = time.monotonic() - max(0.0, self.lease / 3 - tick)
        return [member for member, (_, since) in self.held.items() if since <= cutoff][:MAX_BATCH]

    def on_renewed(self, members: Sequence[str], statuses: Sequence[int]) -> None:
        now = time.monotonic()
        for member, status in zip(members, statuses, strict=True):
            if member not in self.held:
                continue  # its handler returned meanwhile: ending it
            if status == 1:
                self.held[member] = (self.held[member][0], now)
            else:  # recovery freed it: this worker was late renewing it
                del self.held[member]
                log.warning(
                    "the limit key slot held for a stopped handler still running (key %r) expired; "
                    "its key's next job may start beside it", member.partition("{")[2],
                )  # fmt: skip
