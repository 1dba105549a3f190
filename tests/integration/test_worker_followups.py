"""Worker defects found by using it (each test failed before its fix; both surfaces)."""

from __future__ import annotations

import asyncio
import logging
import threading

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
