"""Edges of a worker: time limits of prefetched jobs, hooks around a stop, the shutdown's last
attempts, reads of a queue that does not exist, and how maintenance errors are logged."""

from __future__ import annotations

import logging

from _support import api_fixture, wait_until  # noqa: F401 - api_fixture provides `api`
from conveyor import AsyncQueue, Backoff, Queue

FAST = {"lease": 0.9, "backoff": Backoff(base=0.01, jitter=0), "maintenance_interval": 0.1}


async def test_listing_the_waiting_jobs_of_a_queue_that_does_not_exist_writes_nothing(api):
    """jobs('waiting') is a script call, whose first call ran the startup check (HSETNX meta v):
    a read created the queue's meta hash, where counts(), get_job() and jobs() of other states
    write nothing."""
    q = api.queue()
    before = api.all_keys()
    assert await q.jobs("waiting") == []
    assert await q.jobs("waiting") == []
    assert api.all_keys() <= before
    assert api.queue_keys() == []
    job = await q.enqueue("t")  # the queue still works, and its layout version is written
    assert [j.id for j in await q.jobs("waiting")] == [job.id]
    assert api.admin.hget(q.keys.meta, "v") is not None


async def test_an_unexpected_maintenance_error_is_logged_with_its_traceback_once(api, caplog, monkeypatch):
    """The sync worker logged an unexpected maintenance error without its traceback, the asyncio
    one with it at every retry: both now give it once, then the warning alone."""
    cls = AsyncQueue if api.is_async else Queue

    def broken(self, *args, **kwargs):
        raise RuntimeError("a bug in maintenance")

    monkeypatch.setattr(cls, "promote", broken)
    q = api.queue(**FAST)
    with caplog.at_level(logging.WARNING, logger="conveyor.worker"):
        w = api.worker(q, {"t": api.handler()})

        def failures() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "maintenance failed" in r.getMessage()]

        await wait_until(lambda: len(failures()) >= 3, timeout=5, what="three maintenance failures")
        w.stop()
        await w.join(10)
    records = failures()
    assert "a bug in maintenance" in records[0].getMessage()
    assert records[0].exc_info is not None
    assert [r.exc_info for r in records[1:]] == [None] * (len(records) - 1)
