"""Upgrade safety: a queue written by the scripts of the last release (c70ab76) and worked by
today's scripts, or by both at once (a rolling deploy: old and new workers and clients on one
queue). The old scripts' text is kept in lua_c70ab76/ (``git show c70ab76:queue/conveyor/_lua/<f>``)
and run with the KEYS and ARGV the current client builds (neither changed for these scripts)."""

from __future__ import annotations

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
