"""The least-privilege ACL rules for a user that runs Conveyor queues and workers.

Conveyor needs its own keys (``<prefix>:{<queue>}:*``), the commands its clients send, and the
commands its Lua scripts call (a script runs with the caller's permissions). Nothing else: no
pub/sub channel, no other key, no administrative command except CLIENT UNBLOCK, which lets
``Worker.stop()`` end its own idle wait at once (without it, stop waits up to ``block_timeout``).
"""

from __future__ import annotations

from ._keys import validate_name

# Sent by Queue, AsyncQueue and the workers (CONFIG GET only reads maxmemory-policy; refused, it
# costs a warning instead of the check). HELLO and CLIENT SETNAME are sent by redis-py on connect.
# LRANGE, ZRANGE and ZREVRANGE list jobs by state (`conveyor jobs`).
CLIENT_COMMANDS = (
    "evalsha", "script|load", "hsetnx", "hget", "hmget", "hgetall", "llen", "zcard", "bzpopmin",
    "ping", "hello", "client|setname", "client|id", "client|unblock", "config|get", "wait",
    "lrange", "zrange", "zrevrange",
)  # fmt: skip
# Called inside the Lua transitions (tests check this list against the scripts).
SCRIPT_COMMANDS = (
    "del", "exists", "hdel", "hget", "hincrby", "hmget", "hset", "llen", "lpush", "lrem", "rpop",
    "rpush", "time", "zadd", "zcard", "zrange", "zrangebyscore", "zrem", "zremrangebyrank",
)  # fmt: skip


def acl_rules(prefix: str = "cv", queue: str | None = None) -> str:
    """ACL rules (for ``ACL SETUSER <user> on ><password> <rules>``) limited to Conveyor's keys.

    With ``queue``, only that queue's keys; otherwise every queue under ``prefix``.
    """
    validate_name("prefix", prefix)
    pattern = f"{prefix}:{{{validate_name('queue', queue)}}}:*" if queue else f"{prefix}:{{*}}:*"
    commands = sorted(set(CLIENT_COMMANDS) | set(SCRIPT_COMMANDS))
    return " ".join(["resetkeys", f"~{pattern}", "resetchannels", "-@all", *(f"+{c}" for c in commands)])
