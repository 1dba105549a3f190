"""One blocking wait over the wake-up markers of several queues, shared by their workers.

A worker process serving several queues keeps one pump per queue (one round trip acks and claims)
but one waiter for all of them on a server: a single ``BZPOPMIN`` over the markers of the queues,
plus a wake key of its own. On Cluster a multi-key command must stay in one slot, so there is one
waiter per slot among the served queues (in practice one per queue); see ``wait_groups()``.

Which markers a wait covers: every watched queue, except one whose marker was popped while its
worker could not use a wake-up (all its slots busy, or stopping). That wake-up is passed on (ZADD)
to the other workers of the queue, and the queue is left out of the next waits, so a backlog on a
busy queue cannot make the wait return again and again. A left-out queue is taken back when its
worker asks for a wake-up again; if a wait is in progress without it, that worker adds a member to
the wake key (one round trip on its pump connection; the key expires within seconds), so the wait
returns and starts again over the new set. The markers' order rotates at every call: BZPOPMIN pops
the first non-empty key, and the order of the queues sets no priority.

``WaitSet`` holds that state (no I/O); ``MarkerWaiter`` (a thread) and
``AsyncMarkerWaiter`` (a task) run the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._replies import text
from ._retry import RECONNECT
from ._topology import is_cluster

log = logging.getLogger("conveyor.worker")
WAKE_MEMBER = "0"  # the member every wake-up adds to a marker (as wake() in _lua/_lib.lua does)
JOIN_TIMEOUT = 2.0  # how long close() waits for the wait thread or task to end
CLOSE_POLL = 0.05  # how often close() closes again while the wait thread runs on
NOTHING, SIGNAL, SEND = range(3)  # what WaitSet.ask requires: nothing, a local signal, the wake key


@dataclass(eq=False)
class Watch:
    """One queue's worker: whether it can use a wake-up now, and how to wake its pump."""

    wants: Callable[[], bool]
    wake: Callable[[], None]
    left_out: bool = False


class WaitSet:
    """Which markers the next wait covers, and what a finished wait means (thread-safe)."""

    def __init__(self, wake_key: str, block_timeout: float) -> None:
        self.wake_key, self.block_timeout = wake_key, block_timeout
        self.wake_ttl_ms = round(block_timeout * 1000) + 5000  # outlives any wait that could pop it
        self.watches: dict[str, Watch] = {}
        self.blocking = False  # a wait is in progress (its markers are the ones not left out)
        self.turn = 0
        self.lock = threading.Lock()

    def add(self, marker: str, wants: Callable[[], bool], wake: Callable[[], None]) -> None:
        """Watch a queue from its worker's first ``ask()`` on (a wait in progress lacks it)."""
        with self.lock:
            self.watches[marker] = Watch(wants, wake, left_out=True)

    def remove(self, marker: str) -> None:
        with self.lock:
            self.watches.pop(marker, None)

    def next_keys(self) -> list[str]:
        """The keys of the next wait, rotated, with the wake key last; empty: nothing to wait on."""
        with self.lock:
            markers = [m for m, watch in self.watches.items() if not watch.left_out]
            self.blocking = bool(markers)
            if not markers:
                return []
            self.turn = (self.turn + 1) % len(markers)
            return [*markers[self.turn :], *markers[: self.turn], self.wake_key]

    def ended(self, reply: Any) -> str | None:
        """A wait returned ``reply`` (None: timeout or error). Wakes the worker whose marker was
        popped, or returns that marker when the wake-up must be passed on."""
        with self.lock:
            self.blocking = False
            key = text(reply[0]) if reply else self.wake_key
            if key == self.wake_key:
                return None
            watch = self.watches.get(key)
            if watch is not None and watch.wants():
                watch.wake()
                return None
            if watch is not None:
                watch.left_out = True
            return key  # a full or stopping worker, or a queue no longer served: pass it on

    def ask(self, marker: str) -> int:
        """A worker can use a wake-up: take its queue back into the waits if it was left out."""
        with self.lock:
            watch = self.watches.get(marker)
            if watch is None or not watch.left_out:
                return NOTHING
            watch.left_out = False
            return SEND if self.blocking else SIGNAL

    def wake_pipeline(self, client: Any) -> Any:
        """The one round trip that ends a wait in progress (not executed): ZADD and PEXPIRE."""
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("ZADD", self.wake_key, 0, WAKE_MEMBER)
        pipe.execute_command("PEXPIRE", self.wake_key, self.wake_ttl_ms)
        return pipe


def new_wait_set(wake_key_of: Callable[[str], str], block_timeout: float) -> WaitSet:
    return WaitSet(wake_key_of(uuid.uuid4().hex[:16]), block_timeout)


def wait_groups(client: Any, markers: Sequence[str]) -> list[list[int]]:
    """Indexes of ``markers`` that one wait can cover: all of them on one server (or behind
    Sentinel); on Cluster, those in the same slot (BZPOPMIN refuses keys of several slots)."""
    if not is_cluster(client):
        return [list(range(len(markers)))] if markers else []
    groups: dict[int, list[int]] = {}
    for index, marker in enumerate(markers):
        groups.setdefault(client.keyslot(marker), []).append(index)
    return list(groups.values())


class _Shared:
    """What the sync and asyncio waiters share: their set and how a worker asks for wake-ups."""

    set: WaitSet
    _changed: threading.Event | asyncio.Event  # set when a queue is taken back while idle

    def unwatch(self, marker: str) -> None:
        self.set.remove(marker)

    def ask(self, marker: str) -> bool:
        """True when the caller must end the wait in progress (``set.wake_pipeline``)."""
        action = self.set.ask(marker)
        if action == SIGNAL:
            self._changed.set()
        return action == SEND


class MarkerWaiter(_Shared):
    """A thread blocking in BZPOPMIN on one connection (``client``) for the watched queues."""

    _changed: threading.Event

    def __init__(self, client: Any, wait_set: WaitSet) -> None:
        self.client, self.set = client, wait_set
        self._changed, self._closed = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, marker: str, wants: Callable[[], bool], wake: Callable[[], None]) -> None:
        """Called by each worker's thread as it starts: the first starts the wait thread."""
        self.set.add(marker, wants, wake)
        with self.set.lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="conveyor-waiter")
                self._thread.start()

    def _run(self) -> None:
        attempt = 0  # failed waits in a row
        while not self._closed.is_set():
            keys = self.set.next_keys()
            if not keys:
                self._changed.wait(1.0)
                self._changed.clear()
                continue
            try:
                reply = self.client.bzpopmin(keys, timeout=self.set.block_timeout)
                pass_on = self.set.ended(reply)
                if pass_on:
                    self.client.zadd(pass_on, {WAKE_MEMBER: 0})
                attempt = 0
            except Exception as exc:
                self.set.ended(None)
                if self._closed.is_set():
                    return
                # The pumps notice a lost server on their next call and back off; so does this
                # wait (each retry may ask a Sentinel, then connect), for as long as it is lost.
                attempt += 1
                log.debug("idle wait interrupted (%s)", exc)
                self._closed.wait(RECONNECT.delay(attempt))

    def close(self) -> None:
        """End the wait: closing the socket ends a BZPOPMIN in progress (no CLIENT UNBLOCK, which
        Dragonfly lacks). A wait or pass-on that began just after a close reopened a connection
        from the closed pool, so close again every CLOSE_POLL until the thread ended (at most
        JOIN_TIMEOUT), and once more after: a stopped worker leaves no connection behind."""
        self._closed.set()
        self._changed.set()
        thread, deadline = self._thread, time.monotonic() + JOIN_TIMEOUT
        while True:
            with contextlib.suppress(Exception):
                self.client.close()
            if thread is None or not thread.is_alive() or time.monotonic() >= deadline:
                break
            thread.join(CLOSE_POLL)
        with contextlib.suppress(Exception):
            self.client.close()


class AsyncMarkerWaiter(_Shared):
    """A task awaiting BZPOPMIN on one connection (``client``) for the watched queues."""

    _changed: asyncio.Event

    def __init__(self, client: Any, wait_set: WaitSet) -> None:
        self.client, self.set = client, wait_set
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def watch(self, marker: str, wants: Callable[[], bool], wake: Callable[[], None]) -> None:
        self.set.add(marker, wants, wake)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        attempt = 0  # failed waits in a row
        while True:
            keys = self.set.next_keys()
            if not keys:
                await self._changed.wait()
                self._changed.clear()
                continue
            try:
                reply = await self.client.bzpopmin(keys, timeout=self.set.block_timeout)
                pass_on = self.set.ended(reply)
                if pass_on:
                    await self.client.zadd(pass_on, {WAKE_MEMBER: 0})
                attempt = 0
            except Exception as exc:
                self.set.ended(None)
                # As the sync twin: back off for as long as the server is lost.
                attempt += 1
                log.debug("idle wait interrupted (%s)", exc)
                await asyncio.sleep(RECONNECT.delay(attempt))

    async def aclose(self) -> None:
        """Cancel the wait (redis-py drops a connection whose command was cancelled), then close."""
        if self._task is not None:
            self._task.cancel()
            # redis-py can swallow a cancellation mid-command; never wait on it without a bound.
            await asyncio.wait([self._task], timeout=JOIN_TIMEOUT)
        with contextlib.suppress(Exception):
            await self.client.aclose()
