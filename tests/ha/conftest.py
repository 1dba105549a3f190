"""Fixtures of the high-availability suite: a real Cluster and a real Sentinel group.

These tests start many processes and kill primaries, so they run in their own nox session
(`nox -s ha`), not in `nox -s tests`. The server kind is CONVEYOR_HA_SERVER (default valkey-9.1);
a kind that cannot start here is skipped with the launcher's reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _ha import started

from bench.topologies import Cluster, SentinelGroup, start_cluster, start_sentinel_group


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.ha)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A 3-primary cluster with one replica each, shared by the tests that do not kill nodes."""
    yield from started(start_cluster)


@pytest.fixture(scope="session")
def sentinels() -> Iterator[SentinelGroup]:
    """A primary, two replicas and three Sentinels, shared by the tests that do not kill nodes."""
    yield from started(start_sentinel_group)
