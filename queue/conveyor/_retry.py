"""Pure retry arithmetic: job retry backoff and reconnection backoff."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

MAX_DELAY = 1e9  # seconds: _settings_checks.MAX_SECONDS, the bound of every duration


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full-range jitter: delay = min(cap, base * factor**(n-1)) * U(1-j, 1)."""

    base: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        # Finite and bounded: a retry's delay becomes whole ms for the fail script, where inf or
        # NaN raised at the first failure and turned every retry into a final failure.
        numbers = (self.base, self.factor, self.cap, self.jitter)
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in numbers) or not (
            0 <= self.base <= MAX_DELAY and 0 <= self.cap <= MAX_DELAY
            and 1 <= self.factor < math.inf and 0 <= self.jitter <= 1
        ):  # fmt: skip
            raise ValueError(
                f"invalid backoff {self!r}: need base and cap numbers of seconds in 0..{MAX_DELAY:g}, "
                "a finite factor >= 1 and 0 <= jitter <= 1"
            )

    def _max_exponent(self) -> int:
        """The exponent past which base * factor**n is above the cap (so n never overflows)."""
        if self.factor <= 1 or self.base <= 0 or self.cap <= self.base:
            return 0 if self.factor > 1 else 1
        return math.ceil(math.log(self.cap / self.base) / math.log(self.factor)) + 1

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1 = the first retry)."""
        raw = min(self.cap, self.base * self.factor ** min(max(0, attempt - 1), self._max_exponent()))
        spread = (rng or random).uniform(1.0 - self.jitter, 1.0)
        return raw * spread


def retry_delay_ms(policy: Backoff, attempts: int, max_attempts: int, retry: bool) -> int:
    """Delay for the fail script: -1 means do not retry (final failure). ``retry`` must be a bool:
    ``fail(job, err, retry="no")`` retried the job, and None or 0 failed it for good, silently."""
    if type(retry) is not bool:
        raise TypeError(f"retry must be True or False, got {retry!r}")
    if not retry or attempts >= max_attempts:
        return -1
    return round(policy.delay(attempts) * 1000)


RECONNECT = Backoff(base=0.05, factor=2.0, cap=2.0, jitter=0.5)
