"""Shared by the HA fixtures and tests: which server kind, and starting a topology or skipping."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

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


async def async_wait_checked(url: str, name: str, replica: Callable[[], AbstractContextManager[Any]],
                             replicas: int) -> None:  # fmt: skip
    """An AsyncQueue with wait_replicas=`replicas` writes to `replica`; one more raises, naming both."""
    from conveyor import AsyncQueue, ReplicationError  # noqa: PLC0415

    queue = AsyncQueue.from_url(url, name, wait_replicas=replicas)
    job = await queue.enqueue("t", 1)
    with replica() as client:
        assert client.hget(queue.core.keys.job(job.id), "n") == b"t"
    too_many = AsyncQueue.from_url(url, name, wait_replicas=replicas + 1, wait_timeout=0.2)
    with pytest.raises(ReplicationError, match=f"only {replicas} of {replicas + 1} replicas"):
        await too_many.enqueue("t", 2)
    await queue.aclose()
    await too_many.aclose()


def too_many_replicas_refused(url: str, name: str, replicas: int) -> None:
    """A sync Queue waiting for one replica more than there are raises ReplicationError."""
    from conveyor import Queue, ReplicationError  # noqa: PLC0415

    queue = Queue.from_url(url, name, wait_replicas=replicas + 1, wait_timeout=0.2)
    with pytest.raises(ReplicationError, match=f"only {replicas} of {replicas + 1} replicas"):
        queue.enqueue("t", 1)
    queue.close()
