"""Server differences handled by the library, tested without a server (no Dragonfly binary here:
these code paths are unverified against Dragonfly itself; the facts come from servers.md)."""

from __future__ import annotations

import logging

import pytest
from conveyor import QueueSettings, ServerConfigError
from conveyor._connection import check_policy, eviction_policy

REDIS_INFO = {"used_memory": 1000, "maxmemory_policy": "noeviction"}
DRAGONFLY_INFO = {"used_memory": 1000, "maxmemory_policy": "noeviction", "cache_mode": "store"}


@pytest.mark.parametrize(
    ("info", "policy"),
    [
        (REDIS_INFO, "noeviction"),
        ({b"maxmemory_policy": b"allkeys-lru"}, "allkeys-lru"),
        (DRAGONFLY_INFO, "noeviction"),
        ({**DRAGONFLY_INFO, "cache_mode": "cache"}, "cache_mode=cache"),
        ({"used_memory": 1}, ""),
        (ConnectionError("down"), ""),
        (None, ""),
    ],
)
def test_eviction_policy_is_read_from_info(info, policy):
    assert eviction_policy(info) == policy


def test_policy_check_passes_quietly_on_both_kinds_of_info(caplog):
    caplog.set_level(logging.WARNING, logger="conveyor")
    for info in (REDIS_INFO, DRAGONFLY_INFO):
        check_policy(QueueSettings(strict=True), info)
    assert caplog.records == []


def test_dragonfly_cache_mode_counts_as_eviction():
    with pytest.raises(ServerConfigError, match="cache_mode=cache"):
        check_policy(QueueSettings(strict=True), {**DRAGONFLY_INFO, "cache_mode": "cache"})


def test_unreadable_policy_warns(caplog):
    caplog.set_level(logging.WARNING, logger="conveyor")
    check_policy(QueueSettings(strict=True), {"used_memory": 1})
    assert "could not read maxmemory_policy" in caplog.text
