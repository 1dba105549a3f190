"""Sans-I/O calls of a worker's maintenance (see _ops.py): promote due delayed jobs, recover
expired leases, trim finished jobs, and renew or end the limit-key slots held for stopped
handlers still running (_slot_holds.py). Queue, AsyncQueue and the workers run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._ops import Call, check_count
from ._scripts import Scripts

if TYPE_CHECKING:
    from ._keys import QueueKeys
    from ._ops import QueueCore


def _batch(core: QueueCore, batch: int | None) -> int:
    batch = core.settings.maintenance_batch if batch is None else batch
    return check_count("batch", batch, 1, 100_000)


def promote_call(core: QueueCore, batch: int | None) -> Call[int]:
    k = core.keys
    return Call(
        Scripts.PROMOTE.value,
        (k.delayed, k.waiting, k.marker, k.jobs),
        (_batch(core, batch),),
        lambda r: int(r[0]),
    )


def _recover_keys(k: QueueKeys) -> tuple[str, ...]:
    return (k.meta, k.waiting, k.active, k.failed, k.marker, k.jobs, k.dedup, k.events, k.results,
            k.result_index, k.cancelled, k.held_slots)  # fmt: skip


def recover_call(core: QueueCore, batch: int | None) -> Call[tuple[int, int]]:
    """(redelivered, ended): ended counts jobs that failed for lack of attempts or ended
    cancelled (a cancel was requested while their worker was gone)."""
    return Call(
        Scripts.RECOVER.value,
        _recover_keys(core.keys),
        (_batch(core, batch), core.settings.keep_failed, core._window_ms(), core._result_ttl_ms()),
        lambda r: (int(r[0]), int(r[1]) + int(r[2])),
    )


def trim_call(core: QueueCore, batch: int | None) -> Call[int]:
    s, k = core.settings, core.keys
    stored = 1 if s.store_results else 0
    ages = [-1 if a is None else round(a * 1000) for a in (s.completed_max_age, s.failed_max_age)]
    return Call(
        Scripts.TRIM.value,
        (k.completed, k.failed, k.jobs, k.dedup, k.results, k.cancelled, k.result_index),
        (s.keep_completed, ages[0], s.keep_failed, ages[1], _batch(core, batch), core._window_ms(), stored),
        lambda r: sum(int(n) for n in r),
    )


def hold_call(core: QueueCore, renew: Sequence[str], end: Sequence[str]) -> Call[list[int]]:
    """Renew (for one lease) and end held slots (see QueueCore.fail's ``hold``; at most
    MAX_BATCH of each): 1 each done, 0 gone."""
    args = [core._default_lease_ms, len(renew), *renew, *end]
    keys = (core.keys.held_slots, core.keys.waiting, core.keys.jobs, core.keys.marker)
    return Call(Scripts.HOLD.value, keys, args, lambda r: [int(s) for s in r])
