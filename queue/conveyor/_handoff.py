"""Jobs from an AsyncWorker's pump to its idle handler tasks.

An ``asyncio.Queue`` did the same with more Python per job (its getter and putter bookkeeping, an
unfinished-task count, a second wake-up check on each get): here a claimed job goes straight into
the future an idle slot awaits, or waits in a deque while every slot is busy.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Handoff(Generic[T]):
    """One producer (the pump), many consumers (the slots), on one event loop."""

    __slots__ = ("_idle", "_items")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._idle: deque[asyncio.Future[T]] = deque()  # slots waiting, first come first served

    def put(self, item: T) -> None:
        idle = self._idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():  # else its slot was cancelled while waiting
                waiter.set_result(item)
                return
        self._items.append(item)

    async def get(self) -> T:
        if self._items:
            return self._items.popleft()
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._items.appendleft(waiter.result())  # given but not taken: not lost
            raise

    def take_all(self) -> list[T]:
        """The items no slot has taken yet (they leave the hand-off)."""
        items = list(self._items)
        self._items.clear()
        return items
