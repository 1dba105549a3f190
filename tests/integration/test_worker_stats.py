"""A worker's own counts (``run()``'s stats, logged by ``conveyor worker`` at exit) count only what
the server accepted, on both surfaces."""

from __future__ import annotations

import asyncio
import threading

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)


async def test_a_refused_fail_is_not_counted_as_failed(api):
    """Attempt 1's lease is taken over (recovered) while its handler runs; the handler then
    raises, and its fail is refused (the token no longer holds the job). Attempt 2 completes. The
    worker failed nothing: before, its stats counted the refused fail as failed (a refused ack
    was never counted as processed)."""
    q = api.queue(keep_completed=-1, keep_failed=-1, max_attempts=3)
    gate, started = threading.Event(), threading.Event()

    def boom_on_first(job):
        if job.attempts == 1:
            raise RuntimeError("attempt 1 fails after its lease was taken over")

    if api.is_async:

        async def handler(job):
            started.set()
            while job.attempts == 1 and not gate.is_set():
                await asyncio.sleep(0.01)
            boom_on_first(job)

    else:

        def handler(job):
            started.set()
            if job.attempts == 1:
                gate.wait(30)
            boom_on_first(job)

    w = api.worker(q, {"t": handler}, concurrency=1)
    job = await q.enqueue("t", None)
    await wait_until(started.is_set, timeout=10, what="attempt 1 to start")
    api.admin.zadd(q.keys.active, {job.id: 0})  # its lease looks expired: recovery takes it over
    assert await q.recover() == (1, 0)
    gate.set()
    await wait_until(lambda: _state(api, q, job.id) == b"c", timeout=10, what="attempt 2 to complete")
    w.stop()
    stats = await w.join(10)
    assert (stats["processed"], stats["failed"]) == (1, 0)
    assert await q.counts() == counts(completed=1, total_completed=1)


def _state(api, q, job_id: str) -> bytes | None:
    return api.admin.hget(q.keys.jobs + job_id, "s")
