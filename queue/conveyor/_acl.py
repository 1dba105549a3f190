"""The least-privilege ACL rules for a user that runs Conveyor queues and workers.

Conveyor needs its own keys (``<prefix>:{<queue>}:*``), the commands its clients send, and the
commands its Lua scripts call (a script runs with the caller's permissions). Nothing else: no
pub/sub channel, no other key, no administrative command (INFO is read once per queue, for the
eviction policy).
"""

from __future__ import annotations

from ._keys import validate_name

# Sent by Queue, AsyncQueue and the workers (INFO, or CONFIG GET on a Cluster, only reads the
# eviction policy; refused, it costs a warning instead of the check, except with driver glide,
# which sends INFO as it connects). HELLO and CLIENT SETNAME are sent by redis-py on connect.
# ZADD passes on a wake-up a full worker cannot use; ZADD and PEXPIRE end a wait shared by the
# workers of several queues (_waiter.py). LRANGE, ZRANGE and ZREVRANGE list jobs by state
# (`conveyor jobs`). XREAD waits for job results (store_results; the records themselves are read
# by a script). CLUSTER SLOTS (the slot map), COMMAND (its key parser) and ASKING (a key of a slot
# being migrated) are sent by redis-py's cluster client.
CLIENT_COMMANDS = (
    "evalsha", "script|load", "hsetnx", "hget", "hmget", "hgetall", "llen", "zcard", "bzpopmin",
    "ping", "hello", "client|setname", "info", "config|get", "wait", "zadd", "pexpire",
    "lrange", "zrange", "zrevrange", "xread", "cluster|slots", "command", "asking",
)  # fmt: skip
# Called inside the Lua transitions (tests check this list against the scripts).
SCRIPT_COMMANDS = (
    "decr", "decrby", "del", "exists", "get", "hdel", "hget", "hincrby", "hmget", "hset", "incr",
    "incrby", "llen",
    "lpush", "lrem", "rpop", "rpush", "set", "time", "zadd", "zscore", "lrange", "lindex", "lpop",
    "zcard", "zrange", "zrangebyscore", "zrem", "zremrangebyrank", "zrevrange", "xadd", "xrevrange",
    "hgetall",  # also a client command: the rules of earlier releases grant it
)  # fmt: skip


def acl_rules(prefix: str = "cv", queue: str | None = None) -> str:
    """ACL rules (for ``ACL SETUSER <user> on ><password> <rules>``) limited to Conveyor's keys.

    With ``queue``, only that queue's keys; otherwise every queue under ``prefix``.
    """
    validate_name("prefix", prefix)
    pattern = f"{prefix}:{{{validate_name('queue name', queue)}}}:*" if queue else f"{prefix}:{{*}}:*"
    commands = sorted(set(CLIENT_COMMANDS) | set(SCRIPT_COMMANDS))
    return " ".join(["resetkeys", f"~{pattern}", "resetchannels", "-@all", *(f"+{c}" for c in commands)])
