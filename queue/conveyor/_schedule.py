"""Periodic job specs and their fire times (pure: no I/O).

A schedule fires either on a cron expression evaluated in a time zone (croniter, the ``cron`` extra)
or every ``every`` seconds, at multiples of ``every`` since the Unix epoch, so every process computes
the same fire times. Fire times are integer milliseconds since the epoch.

Missed fires (no scheduler ran at a fire time, e.g. during a deployment or an outage):
``missed="once"`` (default) runs the most recent missed fire once and drops older ones;
``missed="skip"`` drops every fire time that is more than ``grace`` seconds old when first seen,
beyond ``TICK_LATENESS_MS``: a running scheduler sees each fire time a little late.
A new schedule starts with the first fire time after a scheduler first sees it (never in the past).

A schedule redefined under the same name (a deployment) takes effect from the new definition's
next fire time: with the stored next fire time goes a mark naming the definition that stored it
(``fingerprint``) and a floor, the time up to which fires were handled. A scheduler whose
definition differs moves a future stored time earlier to its own next fire time after the floor
(never later), and leaves a due time it does not share to the definition that stored it for
``OWNER_WAIT_MS``. So while old and new schedulers run together, a due time is fired by its own
definition, every fire time is later than the previous one (none twice), and once the old ones are
gone the new definition fires alone. A time stored without a valid mark (by an earlier version)
is kept until due, as before.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._errors import InvalidNameError
from ._keys import MAX_NAME_LENGTH, validate_name
from ._models import Limit, check_priority
from ._ops import delay_ms_of
from ._settings_checks import (
    DURATIONS,
    MAX_SECONDS,
    NO_LIMIT,
    Seconds,
    _count_problem,
    _duration_problem,
)

MAX_SCHEDULE_NAME = MAX_NAME_LENGTH - len("cron::") - 20  # 20: the digits of any fire time in ms

MISSED_POLICIES = ("once", "skip")

# How late a running scheduler may see a fire time (it ticks at least once a second, then a round
# trip): missed="skip" drops only fire times older than grace plus this. Without it, grace=0 dropped
# every fire time, and a small grace some, while a scheduler ran.
TICK_LATENESS_MS = 1_000

# How long a due fire time stored by another definition of a schedule is left to that definition's
# schedulers (a rolling deploy runs both), before one whose definition does not fire it moves on.
OWNER_WAIT_MS = 60_000


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise ValueError(f"unknown time zone {tz!r}") from exc


def _check_cron(expression: str) -> Any:
    try:
        from croniter import croniter  # noqa: PLC0415 - optional extra, needed only for cron specs
    except ImportError as exc:
        raise ImportError("cron schedules need the 'cron' extra: pip install 'conveyor[cron]'") from exc
    if not isinstance(expression, str):
        raise ValueError(f"invalid cron expression {expression!r}: not a string")
    try:
        croniter(expression)
    except Exception as exc:  # croniter's CroniterBadCronError and kin: its message says what is wrong
        raise ValueError(f"invalid cron expression {expression!r}: {exc}") from None
    return croniter


# croniter's random field ('R', 'R(0-5)', 'R/10'): a new draw at each use, so no two processes agree
_RANDOM_FIELD = re.compile(r"r(\(\d+-\d+\))?(/\d+)?", re.IGNORECASE)


def _check_cron_fires(expression: str) -> None:
    """Refuse a valid cron expression whose fire times are not the same in every process, or never come."""
    croniter = _check_cron(expression)
    if any(_RANDOM_FIELD.fullmatch(item) for item in expression.split()):
        raise ValueError(
            f"invalid cron expression {expression!r}: a random field (R) differs in each scheduler"
        )
    try:
        croniter(expression, datetime.now(UTC)).get_next(datetime)
    except Exception as exc:  # croniter's CroniterBadDateError: no match within its search span
        raise ValueError(f"invalid cron expression {expression!r}: it never matches a date to come") from exc


def _fixed_time(expression: str) -> bool:
    """Whether a cron expression names its minute and hour (no field of the two starts with '*')."""
    if expression.startswith("@"):  # @hourly is '0 * * * *'; the other aliases name both
        return expression.lower() != "@hourly"
    minute, hour = expression.split()[:2]
    return not (minute.startswith("*") or hour.startswith("*"))


def _period(every: object) -> bool:
    """Whether ``every`` is a usable period: a finite number of seconds >= 0.001, not a bool."""
    return (isinstance(every, int | float) and not isinstance(every, bool)
            and math.isfinite(every) and 0.001 <= every <= MAX_SECONDS)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a task is enqueued, and with which arguments."""

    name: str
    task: str
    queue: str
    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"
    missed: Literal["once", "skip"] = "once"
    grace: float = 60.0
    payload: dict[str, Any] = field(default_factory=dict)
    max_attempts: int | None = None
    time_limit: float | None = None
    priority: int = 0
    limit: Limit | None = None
    delay: float = 0.0  # of each fired job, after its fire time (a task's default delay)

    def __post_init__(self) -> None:
        validate_name("schedule name", self.name)
        if len(self.name) > MAX_SCHEDULE_NAME:  # its fires' job ids 'cron:<name>:<ms>' must be valid
            raise InvalidNameError(
                f"schedule name is {len(self.name)} characters long; the limit is {MAX_SCHEDULE_NAME} "
                "(its jobs' ids are 'cron:<name>:<fire time in ms>')"
            )
        if (self.cron is None) == (self.every is None):
            raise ValueError(f"schedule {self.name!r}: give exactly one of cron= or every=")
        if self.every is not None and not _period(self.every):
            raise ValueError(
                f"schedule {self.name!r}: every must be a number of seconds from 0.001 to {MAX_SECONDS:g}, "
                f"got {self.every!r}"
            )
        try:
            if self.cron is not None:
                _check_cron_fires(self.cron)
            _zone(self.tz)
        except ValueError as exc:
            raise ValueError(f"schedule {self.name!r}: {exc}") from exc.__cause__
        if self.missed not in MISSED_POLICIES:
            raise ValueError(
                f"schedule {self.name!r}: missed must be one of {MISSED_POLICIES}, got {self.missed!r}"
            )
        problem = _duration_problem("grace", self.grace, Seconds(inclusive=True))
        if self.max_attempts is not None:
            problem = problem or _count_problem("max_attempts", self.max_attempts, 1, NO_LIMIT)
        problem = problem or _duration_problem("time_limit", self.time_limit, DURATIONS["time_limit"])
        if problem:
            raise ValueError(f"schedule {self.name!r}: {problem}")
        try:
            check_priority(self.priority)
            delay_ms_of(self.delay)
        except ValueError as exc:
            raise ValueError(f"schedule {self.name!r}: {exc}") from None

    def job_id(self, fire_ms: int) -> str:
        """The job of one fire time: the same id in every process, so it can exist only once."""
        return f"cron:{self.name}:{fire_ms}"

    # -- fire times -------------------------------------------------------------------------------
    def next_after(self, now_ms: int) -> int:
        """The first fire time strictly after ``now_ms``."""
        if self.every is not None:
            step = round(self.every * 1000)
            return (now_ms // step + 1) * step
        it = _check_cron(str(self.cron))(str(self.cron), self._datetime(now_ms))
        moment = it.get_next(datetime)
        while self._repeated_fixed_time(moment):
            moment = it.get_next(datetime)
        return _ms(moment)

    def latest_at_or_before(self, now_ms: int) -> int:
        """The last fire time at or before ``now_ms``."""
        if self.every is not None:
            step = round(self.every * 1000)
            return now_ms // step * step
        croniter = _check_cron(str(self.cron))
        # One second later as an instant, not as local time: adding to a local time drops its fold,
        # so in a repeated hour (DST ends) it landed an hour earlier, on a fire time already past.
        latest = _ms(croniter(str(self.cron), self._datetime(now_ms + 1000)).get_prev(datetime))
        if latest > now_ms or self._repeated_fixed_time(self._datetime(latest)):
            it = croniter(str(self.cron), self._datetime(latest))
            while latest > now_ms or self._repeated_fixed_time(self._datetime(latest)):
                latest = _ms(it.get_prev(datetime))
        return latest

    def _repeated_fixed_time(self, moment: datetime) -> bool:
        """Whether ``moment`` is the second occurrence of a local time that a fixed-time cron names.

        As cron does when clocks fall back: an expression that names its minute and hour ('30 2 * * *')
        fires once, at the first occurrence; one with '*' in either field fires at every instant.
        """
        repeated = moment.fold == 1 and moment.replace(fold=0).utcoffset() != moment.utcoffset()
        return repeated and _fixed_time(str(self.cron))

    def _datetime(self, ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(_zone(self.tz))

    def fingerprint(self) -> str:
        """A short digest of what sets the fire times (cron or period, and time zone)."""
        timing = f"{self.cron}|{None if self.every is None else round(self.every * 1000)}|{self.tz}"
        return hashlib.sha256(timing.encode()).hexdigest()[:12]

    def decide(
        self, stored: int | None, now_ms: int, writer: str | None = None, floor: int = 0
    ) -> tuple[int, int | None, int]:
        """(new next fire time, fire time to enqueue now or None, new floor) for the stored state.

        ``writer`` is the fingerprint of the definition that stored ``stored`` (None: unknown, a
        value written by an earlier version), ``floor`` the time up to which it handled fires:
        every fire time enqueued so far is at or before it. The stored time changes only to a
        later one, or to an earlier one after the floor, so fire times are enqueued in increasing
        order and none twice.
        """
        if stored is None:
            return self.next_after(now_ms), None, now_ms
        foreign = writer is not None and writer != self.fingerprint()
        if stored > now_ms:
            if foreign:  # redefined: take effect from this definition's next fire time
                earlier = self.next_after(max(now_ms, floor))
                if earlier < stored:
                    return earlier, None, floor
            return stored, None, floor
        fire = self.latest_at_or_before(now_ms)
        if fire < stored:  # stored by another definition: not a fire time of this one
            if foreign and now_ms - stored < OWNER_WAIT_MS:
                return stored, None, floor  # left to that definition's schedulers, if any still run
            return self.next_after(now_ms), None, now_ms
        if self.missed == "skip" and now_ms - fire > self.grace * 1000 + TICK_LATENESS_MS:
            return self.next_after(now_ms), None, now_ms
        return self.next_after(now_ms), fire, now_ms


def _ms(moment: datetime) -> int:
    return math.floor(moment.timestamp() * 1000)
