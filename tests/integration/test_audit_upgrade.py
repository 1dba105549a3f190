"""Upgrade safety: a queue written by the scripts of the last release (c70ab76) and worked by
today's scripts, or by both at once (a rolling deploy: old and new workers and clients on one
queue). The old scripts' text is kept in lua_c70ab76/ (``git show c70ab76:queue/conveyor/_lua/<f>``)
and run with the KEYS and ARGV the current client builds (neither changed for these scripts)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import JobSpec, Limit
from conveyor._ops import Call
from conveyor._scripts import _helpers

OLD_LUA = Path(__file__).parent / "lua_c70ab76"


def _old_source(name: str) -> str:
    """The script ``name`` as the release c70ab76 built it: its _lib.lua helpers, then the body."""
    body = (OLD_LUA / f"{name}.lua").read_text(encoding="utf-8")
    return _helpers((OLD_LUA / "_lib.lua").read_text(encoding="utf-8"), body) + "\n" + body


def _old(api: Any, call: Call[Any]) -> Any:
    """Run ``call`` (built by the current client) with the old script: an old worker or client."""
    reply = api.admin.eval(_old_source(call.script.name), len(call.keys), *call.keys, *call.args)
    return call.parse(reply)


async def test_a_job_released_by_the_old_scripts_and_cancelled_after_the_upgrade_hands_its_turn_on(api):
    """The old scripts released a parked job without marking its turn (gt). Cancelled by the new
    cancel.lua, it handed nothing on: with none of the key's jobs running, the key's other parked
    job waited for ever with the slot free."""
    q = api.queue()
    core = q.inner.core
    limit = Limit("tenant-old", concurrency=1)
    a, b, c = await q.enqueue_many([JobSpec("t", x, limit=limit) for x in "abc"])
    [running] = await q.claim(count=3)  # a runs, b and c parked
    assert running.id == a.id
    assert _old(api, core.ack([running], claim=0))[0] == [1]  # an old worker: b released, no gt
    assert api.admin.hget(core.keys.job(b.id), "gt") is None
    assert await q.cancel(b.id)  # after the upgrade
    [next_job] = await q.claim(count=3)
    assert next_job.id == c.id
    await q.ack(next_job)
    assert await q.counts() == counts(total_completed=2)
    assert api.admin.keys(f"{core.keys.waiting}:gh:*") == []  # no turn left recorded


async def test_starts_reserved_by_the_old_scripts_are_kept_after_the_upgrade(api):
    """The old claim marked a reserved start rs = 1 (now rs holds the start's time). The new claim
    read 1 as a reservation long past and reserved again, behind every start reserved since: each
    job an old worker had delayed waited its turn twice (here one interval more; a backlog of n
    such jobs, n intervals more)."""
    q = api.queue()
    core = q.inner.core
    limit = Limit("tenant-rate", rate=2)  # a start every 500 ms
    jobs = await q.enqueue_many([JobSpec("t", x, limit=limit) for x in "xyz"])
    first = await q.claim(count=3)  # x starts, y and z reserve the next two starts
    assert [j.id for j in first] == [jobs[0].id]
    due = {}
    for job in jobs[1:]:
        api.admin.hset(core.keys.job(job.id), "rs", 1)  # as the old claim wrote it
        due[job.id] = int(api.admin.zscore(core.keys.delayed, job.id))
    started: dict[str, int] = {}
    deadline = time.monotonic() + 5
    while len(started) < 2 and time.monotonic() < deadline:
        for job in await q.claim(count=3):
            started[job.id] = api.server_ms()
            await q.ack(job)
        await asyncio.sleep(0.02)
    late = {i: started.get(i, 10**15) - due[i] for i in due}
    assert all(ms < 300 for ms in late.values()), late  # each starts at its reserved start


async def test_cancelling_a_job_the_old_scripts_parked_at_a_level_above_0_leaves_no_count(api):
    """The old claim parked jobs of every level in the key's level-0 list. cancel() looked for a
    level-5 job only in its level's list: the job was deleted, its id stayed parked and counted
    as waiting (info said one job waiting, none could be listed or claimed) until a freed slot of
    the key popped it, for ever if none did."""
    q = api.queue()
    core = q.inner.core
    limit = Limit("tenant-old-level", concurrency=1)
    [holder] = await q.enqueue_many([JobSpec("t", "holder", limit=limit)])
    [running] = await q.claim(count=1)
    [old] = await q.enqueue_many([JobSpec("t", "old", limit=limit, priority=5)])
    assert await q.claim(count=1) == []
    base, key = core.keys.waiting, "tenant-old-level"
    assert api.admin.lrem(f"{base}:p5:{key}", 1, old.id) == 1  # as the old claim parked it
    api.admin.zrem(f"{base}:pl:{key}", "5")
    api.admin.lpush(f"{base}:p:{key}", old.id)
    assert await q.cancel(old.id)
    assert await q.counts() == counts(active=1)
    assert api.admin.llen(f"{base}:p:{key}") == 0
    await q.ack(running)
    assert await q.counts() == counts(total_completed=1)
    assert running.id == holder.id


async def test_old_and_new_workers_share_a_limited_queue_of_level_0(api):
    """An old worker's ack (c70ab76) and a new worker's ack alternate on a concurrency-2 key whose
    jobs are all of level 0 (one parked list in either layout): every job runs once, at most two
    at once, and no slot, parked job or turn is left behind."""
    q = api.queue()
    core = q.inner.core
    limit = Limit("tenant-mixed", concurrency=2)
    ids = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(7)])]
    ran: list[str] = []
    running = await q.claim(count=7)
    for turn in range(20):
        assert len(running) <= 2
        if not running:
            break
        job, running = running[0], running[1:]
        ran.append(job.id)
        if turn % 2:
            _old(api, core.ack([job], claim=0))
            running += await q.claim(count=7)
        else:
            running += await q.ack(job, claim=7)
    assert sorted(ran, key=int) == ids
    assert await q.counts() == counts(total_completed=7)
    left = api.admin.keys(f"{core.keys.waiting}:*")
    assert left == [core.keys.waiting.encode() + b":pn"] and api.admin.get(left[0]) == b"0"
