"""Shared by the HA fixtures and tests: which server kind, and starting a topology or skipping."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

import pytest

from bench.servers import ServerUnavailable

T = TypeVar("T")
HA_KIND = os.environ.get("CONVEYOR_HA_SERVER", "valkey-9.1")


def started(start: Callable[[str], AbstractContextManager[T]]) -> Iterator[T]:
    """Yield the running topology, or skip with the launcher's reason if this kind cannot run."""
    try:
        with start(HA_KIND) as running:
            yield running
    except ServerUnavailable as exc:
        pytest.skip(exc.reason)
