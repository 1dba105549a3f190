"""Waiting for job results: one blocking XREAD per client and queue serves all its waiters.

The sync twin runs its reader in a daemon thread, the async twin in a task; both start the reader
with the first waiter and let it end once nobody waits (within ``READ_BLOCK_MS``). The logic they
share (what a probe means, which ids an event names, where to read next) is in ``_results.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from ._batching import reset_in_children
from ._connection import translate_error
from ._errors import QueueClosedError
from ._results import (
    READ_COUNT,
    Probe,
    Registry,
    check_wait,
    closed,
    deadline_of,
    decode_record,
    events_read,
    read_block_ms,
    read_call,
    read_probe,
    record_calls,
    results_off,
    settled,
    time_left,
    timed_out,
)
from ._retry import RECONNECT
from ._topology import where

log = logging.getLogger("conveyor.results")


def _lost(client: Any, exc: Exception) -> None:
    """Warn that the reader lost the server, in Conveyor's words: redis-py's own can quote the
    repr of every Sentinel's client, pool and connection (over 1,000 characters each)."""
    log.warning(
        "result reader lost the server (%s); retrying",
        translate_error(where(client), exc, None, read_only=True),
    )  # XREAD and result reads


class _Slot:
    """One sync waiter: an event set by the reader once the record is read."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.record: bytes | None = None
        self.error: Exception | None = None

    def resolve(self, record: bytes | None, error: Exception | None = None) -> None:
        self.record, self.error = record, error
        self.done.set()


class SyncResults:
    """Result waiting for one ``Queue``."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self._after_fork()
        reset_in_children(self)

    def _after_fork(self) -> None:
        """Nobody waits, no reader runs: also in a forked child, whose copy of the parent's
        waiters, its 'a reader runs' and its lock (maybe held) no thread of the child serves."""
        self.registry: Registry[_Slot] = Registry()
        self.lock = threading.Lock()

    def wait(self, job_id: str, timeout: float | None) -> Any:
        q = self.queue
        check_wait(job_id, timeout)
        if not q.settings.store_results:
            raise results_off(q.name)
        slot = _Slot()
        with self.lock:
            self.registry.add(job_id, slot)
        deadline = deadline_of(timeout)
        try:
            # (a blocking call: a server that stops answering holds it up to socket_timeout)
            probe = self._probe(job_id)
            if probe.wait_after is not None:
                with self.lock:
                    start = self.registry.start_from(probe.wait_after)
                if start:
                    self._start_reader()
                if not slot.done.wait(time_left(deadline)):
                    raise timed_out(job_id, timeout)
                if slot.error is not None:
                    raise slot.error
                probe = Probe(slot.record, None)
        finally:
            with self.lock:
                self.registry.remove(job_id, slot)
        return decode_record(q.settings.serializer, job_id, probe.record)

    def _start_reader(self) -> None:
        try:
            threading.Thread(target=self._read, daemon=True, name="conveyor-results").start()
        except RuntimeError:  # no thread (the process's limit): the next waiter starts the reader
            with self.lock:
                self.registry.running = False
            raise

    def close(self) -> None:
        """Fail every waiter: the queue is closing (the reader then ends within one read)."""
        with self.lock:
            waiters = self.registry.drain()
        for job_id, slot in waiters:
            slot.resolve(None, closed(self.queue.name, job_id))

    def _probe(self, job_id: str) -> Probe:
        try:
            return read_probe(job_id, self.queue._run(read_call(self.queue.core.keys, [job_id])))
        except QueueClosedError as exc:  # a read in flight at close(): it changed nothing
            raise closed(self.queue.name, job_id) from exc

    def _read(self) -> None:
        q, attempt = self.queue, 0
        events, block = q.core.keys.events, read_block_ms(q.client)
        while True:
            with self.lock:
                position = self.registry.next_read()
            if position is None:
                return
            try:
                reply = q.client.xread({events: position}, count=READ_COUNT, block=block)
                with self.lock:
                    read = events_read(self.registry, reply, block / 1000)
                records = self._records(read.wanted)
                attempt = 0
            except Exception as exc:  # waiters time out on their own; keep serving the others
                with self.lock:
                    if not self.registry.waiting:
                        continue  # close() cut the read (or nobody waits now): end, no warning
                attempt += 1
                _lost(q.client, exc)
                threading.Event().wait(RECONNECT.delay(attempt))
                continue
            with self.lock:
                self.registry.advance(position, read.last)
                slots = [(s, r) for i, r in settled(read, records) for s in self.registry.pop(i)]
            for slot, record in slots:
                slot.resolve(record)

    def _records(self, ids: list[str]) -> list[Any]:
        q = self.queue
        return [r for call in record_calls(q.core.keys, ids) for r in q._run(call)]


class AsyncResults:
    """Result waiting for one ``AsyncQueue`` (its reader is a task of the running loop)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.registry: Registry[asyncio.Future[bytes | None]] = Registry()
        self.reader: asyncio.Task[None] | None = None

    async def wait(self, job_id: str, timeout: float | None) -> Any:
        q = self.queue
        check_wait(job_id, timeout)
        if not q.settings.store_results:
            raise results_off(q.name)
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self.registry.add(job_id, future)
        deadline = deadline_of(timeout)
        try:
            try:  # (errors of the call itself are ConveyorErrors, never TimeoutError)
                # The read is bounded by the timeout, but timeout=0 still reads (a finished job).
                left = time_left(deadline)
                probe = await (asyncio.wait_for(self._probe(job_id), left) if left else self._probe(job_id))
                if probe.wait_after is not None:
                    if self.registry.start_from(probe.wait_after):
                        self.reader = asyncio.create_task(self._read())
                    record = await asyncio.wait_for(asyncio.shield(future), time_left(deadline))
                    probe = Probe(record, None)
            except TimeoutError:
                raise timed_out(job_id, timeout) from None
        finally:
            self.registry.remove(job_id, future)
            if future.done() and not future.cancelled():
                future.exception()  # failed by aclose() while its probe ran: read, not logged as lost
        return decode_record(q.settings.serializer, job_id, probe.record)

    async def _probe(self, job_id: str) -> Probe:
        try:
            return read_probe(job_id, await self.queue._run(read_call(self.queue.core.keys, [job_id])))
        except QueueClosedError as exc:  # a read in flight at aclose(): it changed nothing
            raise closed(self.queue.name, job_id) from exc

    def close(self) -> None:
        """Cancel the reader and fail every waiter: the queue is closing."""
        if self.reader is not None:
            self.reader.cancel()
        for job_id, future in self.registry.drain():
            if not future.done():
                future.set_exception(closed(self.queue.name, job_id))

    async def _read(self) -> None:
        try:
            await self._serve()
        finally:  # cancelled with its loop: the next waiter starts a fresh reader
            self.registry.running = False

    async def _serve(self) -> None:
        q, attempt = self.queue, 0
        events, block = q.core.keys.events, read_block_ms(q.client)
        while (position := self.registry.next_read()) is not None:
            try:
                reply = await q.client.xread({events: position}, count=READ_COUNT, block=block)
                read = events_read(self.registry, reply, block / 1000)
                records = await self._records(read.wanted)
                attempt = 0
            except Exception as exc:  # waiters time out on their own; keep serving the others
                attempt += 1
                _lost(q.client, exc)
                await asyncio.sleep(RECONNECT.delay(attempt))
                continue
            self.registry.advance(position, read.last)
            for job_id, record in settled(read, records):
                for future in self.registry.pop(job_id):
                    if not future.done():
                        future.set_result(record)

    async def _records(self, ids: list[str]) -> list[Any]:
        q = self.queue
        return [r for call in record_calls(q.core.keys, ids) for r in await q._run(call)]
