"""Worker logic shared by Worker (threads) and AsyncWorker (asyncio): no I/O in this module.

The pump settles finished jobs and claims new ones in one script call, so a busy worker spends
one round trip per batch of jobs instead of several per job. The dispatcher decides how much to
claim, what to ack, which leases need a heartbeat and when a shutdown is complete.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._keys import validate_name
from ._models import Job, QueueSettings
from ._ops import MAX_BATCH, NULL_RECORD
from ._outcomes import Failure, settle_return, stopped
from ._replies import CANCEL, LEASE_STATUS, STOP_STATUS, TIMEOUT, held_token
from ._settings_checks import Seconds, _count_problem, _duration_problem
from ._slot_holds import SlotHolds
from ._worker_errors import log


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How a worker runs.

    ``prefetch`` jobs are leased beyond ``concurrency`` to hide round trips: each ack+claim call
    then carries a larger batch of short jobs (the Tuning page measures the gain), but a
    prefetched job waits behind busy handlers while another worker may be idle, so the default
    is 0.
    """

    concurrency: int = 1
    prefetch: int = 0
    burst: bool = False
    shutdown_timeout: float = 30.0
    block_timeout: float = 2.0
    install_signal_handlers: bool = True

    def __post_init__(self) -> None:
        # The shared rules of counts and durations check the type too: a float count (2.5 slots,
        # 0.5 prefetch) or a str passed the bare range checks or failed them with a TypeError, and a
        # float claim budget then failed every pump call for ever ("worker pump error; retrying").
        problem = (
            _count_problem("concurrency", self.concurrency, 1, MAX_BATCH)
            or _count_problem("prefetch", self.prefetch, 0, MAX_BATCH)
            # the wait's TTLs and socket timeout derive from it
            or _duration_problem("block_timeout", self.block_timeout, Seconds())
        )
        if problem:
            raise ValueError(problem)
        timeout = self.shutdown_timeout  # inf: no deadline, so not a duration rule (finite, capped)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
            raise ValueError(f"shutdown_timeout must be >= 0 seconds, got {timeout!r}")
        for flag in ("burst", "install_signal_handlers"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be True or False, got {getattr(self, flag)!r}")

    @property
    def capacity(self) -> int:
        """Most jobs leased at once: running plus prefetched."""
        return min(MAX_BATCH, self.concurrency + self.prefetch)


def check_first_run(worker: Any) -> None:
    """Refuse a second run() of a worker: its stop is final (set when a run ends, and a stop()
    before run() must hold), so a second run returned at once and ran nothing, silently."""
    if worker._ran:
        name = type(worker).__name__
        raise RuntimeError(f"{name}.run() was called already: a worker runs once; create a new {name}")
    worker._ran = True


def validate_handlers(handlers: Mapping[str, Callable[..., Any]], want_async: bool) -> None:
    """Reject handlers of the wrong kind at construction, not at the first job."""
    for task, handler in handlers.items():
        validate_name("task name", task)
        if not callable(handler):
            raise TypeError(f"handler for task {task!r} is not callable")
        if inspect.iscoroutinefunction(handler) != want_async:
            kind = "an async def function" if want_async else "a plain (non-async) function"
            raise TypeError(f"handler for task {task!r} must be {kind}")


@dataclass
class Dispatcher:
    """Book-keeping of leased jobs for one worker.

    Leases are keyed by token, not job id: a job redelivered to this worker while an older
    attempt's handler still runs holds two leases here, and settling one never touches the other.
    """

    options: WorkerOptions
    lease: float
    leases: dict[str, tuple[Job, float]] = field(default_factory=dict)
    done: list[Job] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    stopping: bool = False
    stop_asked: float = float("inf")  # monotonic time of the first stop(): the deadline counts from it
    processed: int = 0
    failed: int = 0
    worker_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    sequence: int = 0
    inflight: list[Job] | None = None
    results: dict[str, bytes] = field(default_factory=dict)  # token -> serialised return value
    deadlines: dict[str, float] = field(default_factory=dict)  # token -> time limit (monotonic)
    overrun: set[int] = field(default_factory=set)  # id() of settled jobs whose thread still runs
    releasing: set[str] = field(default_factory=set)  # tokens given back at shutdown: never started
    lost: set[str] = field(default_factory=set)  # leases an extend found lost: warned once, not renewed
    # Claimed jobs whose time limit passed before a slot started them: given back, uncounted.
    expired: list[Job] = field(default_factory=list)
    no_prefetch: bool = False  # set by an expired job: claim for free slots only, until one finishes
    holds: SlotHolds = field(init=False)  # limit-key slots held for stopped handlers still running

    def __post_init__(self) -> None:
        self.holds = SlotHolds(self.lease)

    @property
    def held(self) -> int:
        """Slots in use: leased jobs, plus threads still running jobs settled without them."""
        return len(self.leases) + len(self.overrun)

    @property
    def capacity(self) -> int:
        """Most jobs to hold now: running plus prefetched, or running alone while a job that waited
        in the buffer past its time limit was given back (claimed again, it would only wait again)."""
        return self.options.concurrency if self.no_prefetch else self.options.capacity

    def claim_budget(self, acking: int) -> int:
        if self.stopping:
            return 0
        return max(0, self.capacity - self.held + acking)

    def wants_marker(self) -> bool:
        """True when a wake-up on the marker is of use: this worker could claim more now."""
        return not self.stopping and self.held < self.capacity

    def pending_acks(self) -> list[Job]:
        """Jobs to ack in the next ack+claim call. After a failed call, the same jobs again: a
        re-sent call must match the lost one (same request id, same acks) to be answered from
        the server's record of it."""
        return self.done[:MAX_BATCH] if self.inflight is None else self.inflight

    @property
    def resending(self) -> bool:
        """An ack+claim call got no reply: it must be sent again, even with nothing to ack and no
        claim budget (a stopping worker), to learn the jobs it may have claimed (see ack.lua)."""
        return self.inflight is not None

    def on_sending(self, acks: list[Job]) -> tuple[tuple[str, int], bool]:
        """An ack+claim call is about to be sent: pin its acks. Returns its request id, and whether
        it re-sends a call whose reply never came (its acks are still pinned)."""
        resend = self.inflight is not None
        self.inflight = acks
        return (self.worker_id, self.sequence), resend

    def on_claimed(self, jobs: Sequence[Job]) -> None:
        now = time.monotonic()
        for job in jobs:
            self.leases[held_token(job)] = (job, now)
            if job.time_limit:
                self.deadlines[held_token(job)] = now + job.time_limit

    def on_acked(self, acked: Sequence[Job], statuses: Sequence[int]) -> None:
        del self.done[: len(acked)]
        self.inflight, self.sequence = None, self.sequence + 1
        for job, status in zip(acked, statuses, strict=True):
            self._settle(job)
            if status == 1:
                self.processed += 1
            else:
                log.warning("ack of job %s refused: %s", job.id, LEASE_STATUS.get(status, status))

    def on_started(self, job: Job) -> bool:
        """A slot is about to run ``job``: False when it must not, the job being given back (or
        given back already) at the shutdown deadline, where another worker may claim it, or its
        time limit having passed in the buffer: given back uncounted now, as the next maintenance
        tick would have (started, the tick would fail it for good with its handler running)."""
        token = held_token(job)
        if token not in self.leases or token in self.releasing:
            return False
        if self.deadlines.get(token, float("inf")) <= time.monotonic():
            self.stop(job, TIMEOUT)
            return False
        self.started.add(token)
        self.running.add(token)
        return True

    def ack_results(self, acks: Sequence[Job]) -> list[bytes] | None:
        """The stored return values of ``acks`` (None when results are not stored)."""
        if not self.results:
            return None
        return [self.results.get(job.token or "", NULL_RECORD) for job in acks]

    def on_finished(self, job: Job, failure: Failure | None, result: bytes | None = None) -> None:
        """A handler returned or raised (failure None: success; ``result`` its serialised return
        value, when results are stored). A cancelled handler reports nothing: its job is released
        as started at shutdown. An attempt settled while its thread still ran (cancelled, timed
        out) reports too late: its outcome is dropped."""
        self.no_prefetch = False  # a slot is free: the buffer's next job starts now
        if self.overrun and id(job) in self.overrun:
            self.overrun.discard(id(job))
            self.holds.on_returned(job)  # now, not at the next tick's poll: quiet() waits for its end
            return
        self.running.discard(held_token(job))
        if failure is None:
            self.done.append(job)
            if result is not None:
                self.results[held_token(job)] = result
        else:
            self.failures.append(failure)

    def settle_returned(self, settings: QueueSettings) -> None:
        """At the shutdown deadline, settle the jobs whose task returned while their thread still
        runs their hooks (a thread cannot be stopped): their outcome is decided (a success, or a
        value that cannot be stored), and left to expire they would run again. What the thread
        reports later is dropped."""
        for token in list(self.running):
            job = self.leases[token][0] if token in self.leases else None
            if job is not None and job._return_value is not None:
                self.on_finished(job, *settle_return(settings, job, job._return_value[0]))
                self.overrun.add(id(job))

    def on_failed(self, failure: Failure, accepted: bool = True) -> None:
        """A failure was sent; ``accepted`` False: the fail was refused (the lease was lost, the
        job is another attempt's now), so nothing failed here and it is not counted."""
        self.failures.remove(failure)
        if accepted:
            self.failed += 1
        else:
            log.warning("fail of job %s refused: the lease was lost", failure.job.id)
        if accepted and failure.hold:
            self.holds.on_held(failure.job, running=self.runs_on(failure.job))
        self._settle(failure.job)

    def runs_on(self, job: Job) -> bool:
        """Whether the handler of a settled (stopped) job still runs: a Worker's thread until it
        reports (``on_finished``), an AsyncWorker's task thread while it records running."""
        return id(job) in self.overrun or job._thread_running is True

    def _settle(self, job: Job) -> None:
        token = job.token or next((t for t, (j, _) in self.leases.items() if j is job), "")
        # (a sent fail clears job.token: find its lease by identity)
        self.leases.pop(token, None)
        self.results.pop(token, None)
        if self.deadlines:
            self.deadlines.pop(token, None)
        self.started.discard(token)
        self.running.discard(token)
        self.releasing.discard(token)
        self.lost.discard(token)

    def needs_heartbeat(self, tick: float) -> list[Job]:
        """Leased jobs that would reach a third of their lease before the next tick: the gap
        between two heartbeats of a job (when a cancel can reach its worker) is at most a third."""
        cutoff = time.monotonic() - max(0.0, self.lease / 3 - tick)
        leased = [lease for token, lease in self.leases.items() if token not in self.lost]
        return [job for job, since in leased if since <= cutoff and job.token][:MAX_BATCH]

    def woke_late(self, slept: float, tick: float) -> None:
        """Warn when maintenance, asleep for ``slept`` seconds of a ``tick``, woke a third of a lease
        late or more: nothing in this worker ran meanwhile, so its leases went unrenewed."""
        late = slept - tick
        if late >= self.lease / 3 and self.leases:
            log.warning(
                "worker woke %.1f s late for its heartbeats (its event loop was blocked, or the process "
                "got no CPU); with a lease of %g s, the %d jobs it holds may have been redelivered "
                "and may run twice",
                late, self.lease, len(self.leases),
            )  # fmt: skip

    def on_extended(self, jobs: Sequence[Job], statuses: Sequence[int]) -> list[tuple[Job, str]]:
        """Record renewed leases; returns the jobs to stop, with why (cancel requested, time limit
        passed: see extend.lua)."""
        now = time.monotonic()
        stop: list[tuple[Job, str]] = []
        for job, status in zip(jobs, statuses, strict=True):
            token = job.token
            if status in (1, 2) and token in self.leases:
                self.leases[token] = (job, now)
            if status in STOP_STATUS:
                stop.append((job, STOP_STATUS[status]))
            elif status != 1 and token in self.leases and token not in self.lost and not self._settling(job):
                # A token never holds its lease again (a redelivery gets a new one): warn once,
                # and stop renewing it; the handler's outcome will be refused when it ends.
                self.lost.add(token)
                log.warning("lease of job %s lost: %s", job.id, LEASE_STATUS.get(status, status))
        return stop

    def _settling(self, job: Job) -> bool:
        """The job's ack or fail is pending or in flight, or this worker is giving it back: that
        call's reply says whether the lease was lost (a refused heartbeat can also mean that the
        call already settled it, its reply not read yet: a release at shutdown, say)."""
        if job.token in self.releasing:
            return True
        done = any(j is job for j in self.done) or any(j is job for j in self.inflight or ())
        return done or any(f.job is job for f in self.failures)

    def overdue(self) -> list[Job]:
        """Leased jobs past their time limit (by this worker's clock) not yet asked to stop."""
        if not self.deadlines:
            return []
        now = time.monotonic()
        late = [t for t, deadline in self.deadlines.items() if deadline <= now]
        return [job for t in late if (job := self.leases[t][0]).stop_reason is None and not job._returned]

    def stop(self, job: Job, reason: str) -> bool:
        """Ask a leased job to stop. Returns True when its handler is running (the caller
        interrupts it, or abandons its thread); a job not started yet is settled at once (given
        back uncounted when its time limit passed), one finished already is left to its own report."""
        token = job.token
        if job.stop_reason is not None or token not in self.leases or token in self.releasing:
            return False  # (a job being given back is settled by its release: see release.lua)
        if reason == CANCEL and job._returned:  # its task completed, its after hooks run: a cancel
            return False  # learnt now changes nothing (it ends completed, as production.md says)
        job.stop_reason = reason
        if token in self.running:
            return True
        if token not in self.started and reason == TIMEOUT:  # its limit passed in the buffer: it
            self.expired.append(job)  # never ran under it, so it goes back uncounted (not failed)
            self.releasing.add(token)
            self.no_prefetch = True
        elif token not in self.started:
            never_ran = stopped(job, reason, still_running=False)
            self.failures.append(Failure(job, never_ran.error, never_ran.retry, started=False))
        return False

    def abandon(self, job: Job) -> None:
        """Settle a stopped job whose thread cannot be interrupted: it keeps its slot (and its
        limit key's: ``holds``) until it returns, and whatever it reports then is dropped."""
        self.running.discard(held_token(job))
        self.overrun.add(id(job))
        self.failures.append(stopped(job, job.stop_reason or TIMEOUT, still_running=True))

    def unsettled(self) -> tuple[list[Job], list[bool]]:
        """Leased jobs to release at shutdown: (jobs, started flags). Jobs with something to report
        are left out, and so are jobs whose handler still runs (a thread cannot be stopped): their
        lease is left to expire, so no other worker runs them while this handler still does. A
        slot handed one of them but not started yet never starts it (see ``on_started``)."""
        keep = {j.token for j in self.done} | {f.job.token for f in self.failures}
        keep |= self.running
        jobs = [job for token, (job, _) in self.leases.items() if token not in keep][:MAX_BATCH]
        self.releasing.update(held_token(job) for job in jobs)
        return jobs, [held_token(job) in self.started for job in jobs]

    def releasable(self, jobs: Sequence[Job]) -> list[Job]:
        """Of claimed jobs no slot took, those to give back at a stop, marked as being given back
        (``stop`` then leaves them to the release). A job stopped already (a cancel, its time
        limit) is left out: its queued or sent fail (or release, see ``expired``) settles it;
        released too, it was settled twice (its fail then refused and logged as a lost lease)."""
        jobs = [job for job in jobs if job.stop_reason is None]
        self.releasing.update(held_token(job) for job in jobs)
        return jobs

    def on_released(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self._settle(job)

    def on_expired_released(self, jobs: Sequence[Job], statuses: Sequence[int]) -> None:
        """Expired jobs (see ``stop``) were given back: 1 waiting again, 2 cancelled meanwhile."""
        del self.expired[: len(jobs)]
        for job, status in zip(jobs, statuses, strict=True):
            if status not in (1, 2):
                log.warning("release of job %s refused: %s", job.id, LEASE_STATUS.get(status, status))
        self.on_released(jobs)

    def quiet(self) -> bool:
        """Nothing leased and nothing to report."""
        return not (self.leases or self.done or self.failures or self.expired or self.holds.ending)

    def stats(self) -> dict[str, int]:
        return {"processed": self.processed, "failed": self.failed, "held": self.held}


def idle_wait(block_timeout: float, until_due: float) -> float:
    """How long an idle worker blocks on the marker: until the next delayed job, at most the block."""
    return block_timeout if until_due < 0 else max(0.01, min(block_timeout, until_due))
