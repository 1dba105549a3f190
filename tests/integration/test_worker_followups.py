"""Worker defects found by using it (each test failed before its fix; both surfaces)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    wait_until,
)


def _gate(api):
    """An event the test opens and a handler blocks on; ``started`` is set once it runs."""
    gate, started = threading.Event(), threading.Event()

    if api.is_async:

        async def wait(job):
            started.set()
            while not gate.is_set():
                await asyncio.sleep(0.01)

        return gate, started, wait

    def block(job):
        started.set()
        gate.wait(30)

    return gate, started, block


def wait_until_sync(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


async def test_a_lost_lease_is_logged_once_not_at_every_heartbeat(api, caplog):
    """The job's record vanished under a running handler (an operator deleted it): the worker
    warned "lease of job .. lost" at every heartbeat (about 3 per lease) until the handler ended."""
    q = api.queue(lease=0.3, maintenance_interval=0.05)
    gate, started, block = _gate(api)
    caplog.set_level(logging.WARNING, logger="conveyor")
    handle = api.worker(q, {"block": block})
    job = await q.enqueue("block", None)
    await asyncio.to_thread(started.wait, 10)
    api.admin.delete(q.keys.job(job.id))
    await asyncio.sleep(1.0)  # ~10 heartbeats of a 0.3 s lease
    gate.set()
    lost = [r for r in caplog.records if f"lease of job {job.id} lost" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in lost]
    api.stop_workers([handle])


def test_async_worker_stopped_from_another_thread_stops_promptly(redis_url, queue_name):
    """stop() from another thread (a worker run with asyncio.run in a thread, stopped by the main
    thread) set asyncio events off their loop's thread: the idle loop was not woken, and the
    worker went on until its block timeout (30 s here) or hung."""
    from conveyor import AsyncQueue, AsyncWorker  # noqa: PLC0415

    box: dict[str, object] = {}

    async def noop(job) -> None:
        return None

    async def serve() -> None:
        queue = AsyncQueue.from_url(redis_url, queue_name)
        worker = AsyncWorker(queue, {"noop": noop}, install_signal_handlers=False,
                             block_timeout=30)  # fmt: skip
        box["worker"] = worker
        box["stats"] = await worker.run()
        await queue.aclose()

    # debug=True: asyncio then refuses (RuntimeError) what is merely unsafe without it
    thread = threading.Thread(target=asyncio.run, args=(serve(),), kwargs={"debug": True}, daemon=True)
    thread.start()
    wait_until_sync(lambda: "worker" in box, "the worker to start")
    time.sleep(0.5)  # idle: waiting on the server and on its wake-up event
    started = time.monotonic()
    box["worker"].stop()  # type: ignore[attr-defined]  # raised RuntimeError (debug) before
    thread.join(10)
    assert not thread.is_alive(), "stop() from another thread did not stop the worker within 10 s"
    assert time.monotonic() - started < 1 and "stats" in box
