"""Regression tests of graceful-shutdown races: what the worker does at its shutdown deadline with
jobs that finish, or are about to start, while its last call is in flight.

Each test failed on the code before its fix, on both surfaces (Worker and AsyncWorker). The calls
are slowed or interrupted by wrapping the queue's ``_run`` (every script call of a worker goes
through it), so the interleaving is forced rather than hoped for.
"""

from __future__ import annotations

import asyncio
import queue as stdlib_queue
import threading
import time

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    WorkerHandle,
    api_fixture,
    counts,
    wait_until,
)
from conveyor import AsyncQueue, AsyncWorker, Job, Queue, Worker
from conveyor._errors import ConnectionFailedError
from conveyor._scripts import Scripts


def _wrap_run(monkeypatch, api, after):
    """Wrap every script call of the surface's queue class: ``after(call, reply)`` runs once the
    server answered, before the caller sees the reply (a coroutine function on the async one)."""
    cls = AsyncQueue if api.is_async else Queue
    real = cls._run
    if api.is_async:

        async def run(self, call):
            reply = await real(self, call)
            await after(call, reply)
            return reply

    else:

        def run(self, call):
            reply = real(self, call)
            after(call, reply)
            return reply

    monkeypatch.setattr(cls, "_run", run)


async def test_a_job_finished_during_the_last_call_before_the_deadline_is_acked(api, monkeypatch):
    """Job B finishes after stop(); while the ack of B is in flight, job A finishes too, and the
    reply comes after the shutdown deadline. A finished before the deadline: it must be acked,
    not left active (before, the worker returned with A's ack unsent: its lease expired and it
    ran a second time, although it had completed)."""
    q = api.queue(keep_completed=-1, lease=30)
    gates = {"a": threading.Event(), "b": threading.Event()}
    started: list[str] = []
    state = {"worker": None, "armed": False}

    def start(job):
        started.append(job.payload)

    if api.is_async:

        async def handler(job):
            start(job)
            while not gates[job.payload].is_set():
                await asyncio.sleep(0.01)

        async def after(call, reply):
            if state["armed"] and call.script is Scripts.ACK.value:
                state["armed"] = False
                gates["a"].set()  # A finishes while B's ack is in flight ...
                d = state["worker"]._dispatch
                await wait_until(lambda: any(j.payload == "a" for j in d.done), timeout=10,
                                 what="job A to finish")
                await asyncio.sleep(0.8)  # ... whose reply comes after the deadline

    else:

        def handler(job):
            start(job)
            gates[job.payload].wait(30)

        def after(call, reply):
            if state["armed"] and call.script is Scripts.ACK.value:
                state["armed"] = False
                gates["a"].set()
                d = state["worker"]._dispatch
                deadline = time.monotonic() + 10
                while not any(j.payload == "a" for j in d.done) and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.8)

    _wrap_run(monkeypatch, api, after)
    w = api.worker(q, {"t": handler}, concurrency=2, shutdown_timeout=0.5)
    state["worker"] = w.worker
    a, b = await q.enqueue_many([("t", "a"), ("t", "b")])
    await wait_until(lambda: sorted(started) == ["a", "b"], timeout=10, what="both handlers to start")
    state["armed"] = True
    w.worker.stop()
    gates["b"].set()
    stats = await w.join(15)
    assert state["armed"] is False, "B's ack was never sent"
    assert (await q.get_job(a.id)).state == "completed", "A finished before the deadline, never acked"
    assert (await q.get_job(b.id)).state == "completed"
    assert stats["processed"] == 2
    assert await q.counts() == counts(completed=2, total_completed=2)


class _SlowHandoff(stdlib_queue.SimpleQueue):
    """A thread worker's ready queue whose idle slot takes a job at once (before the pump goes on)
    but then takes a while to start it (what a busy GIL or scheduler does to a slot thread)."""

    def __init__(self) -> None:
        self.taken = threading.Event()

    def put(self, item, block=True, timeout=None):
        super().put(item, block, timeout)
        if isinstance(item, Job):
            self.taken.wait(5)

    def get(self, block=True, timeout=None):
        item = super().get(block, timeout)
        if isinstance(item, Job):
            self.taken.set()
            time.sleep(0.3)
        return item


async def test_a_job_released_at_the_deadline_is_never_started(api, monkeypatch):
    """stop() arrives while the ack+claim call is in flight, with shutdown_timeout=0: the jobs it
    claimed are released at once, as never started (their attempt refunded). A slot handed one
    of them just before must not start it: before, the handler ran while the job was back in the
    queue for another worker (it ran twice, and the first run's attempt was refunded)."""
    q = api.queue(keep_completed=-1)
    runs: list[str] = []
    state = {"worker": None, "stopped": False}

    if api.is_async:

        async def after(call, reply):
            if not state["stopped"] and call.script is Scripts.ACK.value and reply[1]:
                state["stopped"] = True
                state["worker"].stop()

    else:

        def after(call, reply):
            if not state["stopped"] and call.script is Scripts.ACK.value and reply[1]:
                state["stopped"] = True
                state["worker"].stop()

    _wrap_run(monkeypatch, api, after)
    job = await q.enqueue("t", None)
    handler = api.handler(start=lambda j: runs.append(j.id))
    options = {"concurrency": 1, "shutdown_timeout": 0.0, "install_signal_handlers": False}
    worker = AsyncWorker(q.inner, {"t": handler}, **options) if api.is_async else Worker(
        q.inner, {"t": handler}, **options)
    if not api.is_async:
        worker._ready = _SlowHandoff()
    state["worker"] = worker
    handle = WorkerHandle(api.surface, worker)
    handle.start()
    try:
        await handle.join(15)
    finally:
        if handle.running:
            await handle.force_cancel()
    assert state["stopped"], "the worker never claimed the job"
    await asyncio.sleep(1.0)  # a slot that was handed the job had time to start it
    stored = await q.get_job(job.id)
    if runs:  # it ran: it must not also be back in the queue for another worker
        assert stored.state != "waiting", f"the job ran and was also released: {stored}"
    else:
        assert (stored.state, stored.attempts) == ("waiting", 0)


async def test_a_claim_whose_reply_was_lost_just_before_stop_is_not_orphaned(api, monkeypatch):
    """The reply of an ack+claim is lost (the server ran it: the job is leased to this worker) and
    stop() comes before the re-send. The re-sent call must still be made, to learn the batch and
    give it back: before, a stopping worker skipped it (nothing to ack, no claim budget), so the
    job stayed active, leased to nobody, until its lease expired; its attempt was burned and with
    max_attempts=1 it ended failed ("lease expired") without ever running."""
    q = api.queue(keep_completed=-1, keep_failed=-1, max_attempts=1, lease=30)
    state = {"worker": None, "lost": False}

    def lose(call, reply):
        if not state["lost"] and call.script is Scripts.ACK.value and reply[1]:
            state["lost"] = True
            state["worker"].stop()
            raise ConnectionFailedError("test: the reply of the ack+claim call was lost")

    if api.is_async:

        async def after(call, reply):
            lose(call, reply)

    else:
        after = lose

    _wrap_run(monkeypatch, api, after)
    job = await q.enqueue("t", None)
    runs: list[str] = []
    w = api.worker(q, {"t": api.handler(start=lambda j: runs.append(j.id))}, shutdown_timeout=5.0)
    state["worker"] = w.worker
    await w.join(15)
    assert state["lost"], "the worker never claimed the job"
    stored = await q.get_job(job.id)
    assert runs == [] or stored.state == "completed"
    if not runs:  # given back, its attempt refunded: the next worker runs it at once
        assert (stored.state, stored.attempts) == ("waiting", 0), stored
