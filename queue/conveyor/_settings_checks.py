"""What each field of ``QueueSettings`` accepts, checked once when it is built.

Every problem is reported at once, naming the field, the rule and the value given. Counts are
ints (a bool or a float is refused: 2.5 connections means nothing); durations are finite numbers
of seconds up to MAX_SECONDS, because the scripts turn them into milliseconds for server-side
expiries and scores, where inf, NaN or 10^12 s would break acks instead of failing here.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ._retry import MAX_DELAY, Backoff

MAX_SECONDS = MAX_DELAY  # 1e9 s, about 31 years; far beyond any lease, timeout or retention a queue needs
NO_LIMIT = math.inf

# field -> (lowest, highest) allowed int
COUNTS: dict[str, tuple[int, float]] = {
    "max_attempts": (1, NO_LIMIT),
    "max_payload_bytes": (1, NO_LIMIT),
    "keep_completed": (-1, NO_LIMIT),
    "keep_failed": (-1, NO_LIMIT),
    "maintenance_batch": (1, 100_000),
    "pool_size": (1, NO_LIMIT),
    "wait_replicas": (0, NO_LIMIT),
    "max_result_bytes": (1, NO_LIMIT),
}


class Seconds(NamedTuple):
    """A duration's rule: its lowest value, whether that value itself is allowed, why it matters."""

    low: float = 0.0
    inclusive: bool = False
    why: str = ""
    optional: bool = False  # None is allowed too


DURATIONS: dict[str, Seconds] = {
    "lease": Seconds(0.05, inclusive=True),
    "maintenance_interval": Seconds(),
    "pool_timeout": Seconds(inclusive=True),
    "socket_timeout": Seconds(),
    "connect_timeout": Seconds(),
    "wait_timeout": Seconds(),
    "result_ttl": Seconds(0.001, inclusive=True, why=" (a result expires this long after its job finished)"),
    "completed_max_age": Seconds(inclusive=True, optional=True),
    "failed_max_age": Seconds(inclusive=True, optional=True),
    "dedup_window": Seconds(inclusive=True, optional=True),
    "time_limit": Seconds(optional=True),
}
FLAGS = ("strict", "batch_enqueue", "store_results")
DRIVERS = ("redis-py", "glide")


def settings_problems(settings: Any) -> list[str]:
    """One message per field of ``settings`` that breaks its rule (empty: all valid)."""
    out = [_count_problem(name, getattr(settings, name), *bounds) for name, bounds in COUNTS.items()]
    out += [_duration_problem(name, getattr(settings, name), rule) for name, rule in DURATIONS.items()]
    out += [f"{name} must be True or False, got {getattr(settings, name)!r}"
            for name in FLAGS if not isinstance(getattr(settings, name), bool)]  # fmt: skip
    if not _is_int(settings.protocol) or settings.protocol not in (2, 3):
        out.append(f"protocol must be 2 or 3, got {settings.protocol!r}")
    # Used only later (at a job's first failure, or its first enqueue), where a wrong object
    # raised AttributeError: 'int' object has no attribute 'delay' / 'dumps'.
    if not isinstance(settings.backoff, Backoff):
        out.append(f"backoff must be a conveyor.Backoff, got {settings.backoff!r}")
    if not all(callable(getattr(settings.serializer, method, None)) for method in ("dumps", "loads")):
        out.append(f"serializer must have dumps() and loads() methods, got {settings.serializer!r}")
    if settings.driver not in DRIVERS:
        out.append(f"driver must be 'redis-py' or 'glide', got {settings.driver!r}")
    out.append(_wait_problem(settings))
    return [message for message in out if message]


def _wait_problem(settings: Any) -> str:
    """WAIT blocks up to wait_timeout on the write's own connection: a socket that times out first
    turned a lagging replica into a ConnectionFailedError ('applied or not') instead of the
    ReplicationError that says the write is on the primary."""
    wait, socket = settings.wait_timeout, settings.socket_timeout
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (wait, socket))
    if not (numbers and _is_int(settings.wait_replicas) and settings.wait_replicas > 0 and wait >= socket):
        return ""
    return (
        f"wait_timeout ({wait} s) must be shorter than socket_timeout ({socket} s) when "
        "wait_replicas > 0: the socket would time out while WAIT waits for the replicas"
    )


def finite(value: float) -> bool:
    """Whether ``value`` is finite; an int too large for a float is not (math.isfinite raises)."""
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float (10**400): OverflowError escaped before
        return False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count_problem(name: str, value: object, low: int, high: float) -> str:
    if _is_int(value) and low <= value <= high:  # type: ignore[operator]
        return ""
    rule = f"an int >= {low}" if high == NO_LIMIT else f"an int in {low}..{int(high)}"
    return f"{name} must be {rule}, got {value!r}"


def _duration_problem(name: str, value: object, rule: Seconds) -> str:
    if value is None and rule.optional:
        return ""
    number = isinstance(value, int | float) and not isinstance(value, bool) and finite(value)
    if number and value > MAX_SECONDS:  # type: ignore[operator]
        return f"{name} must be at most {MAX_SECONDS:g} s, got {value!r}"
    if number and (value >= rule.low if rule.inclusive else value > rule.low):  # type: ignore[operator]
        return ""
    kind = "None or a finite number of seconds" if rule.optional else "a finite number of seconds"
    bound = f"{'>=' if rule.inclusive else '>'} {rule.low:g}"
    return f"{name} must be {kind} {bound}{rule.why}, got {value!r}"
