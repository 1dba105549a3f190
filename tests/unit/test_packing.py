"""Asyncio connections pack commands with hiredis: the same bytes and errors as redis-py's packer."""

from __future__ import annotations

import pytest
import redis.asyncio as aredis
from conveyor import AsyncQueue, Queue
from conveyor._packing import hiredis_packing
from redis.exceptions import DataError

pytest.importorskip("hiredis")

COMMANDS = [
    ("EVALSHA", "a" * 40, 2, "{q}:k1", "{q}:k2", 1, -1, "", "tâche", b'{"d":"\x00x"}', 3, 0, 1.5, 10**20),
    ("PING",),
    ("CONFIG GET", "maxmemory-policy"),  # a multi-word name is split, as redis-py does
    ("SET", "k", bytearray(b"v"), memoryview(b"w")),  # types hiredis does not take
    ("SET", "k", "x" * 10_000),  # larger than redis-py's buffer cutoff
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: str(a[0]))
def test_packed_bytes_are_redis_pys(args) -> None:
    plain, packed = aredis.Connection(), hiredis_packing(aredis.Connection)()
    assert b"".join(map(bytes, packed.pack_command(*args))) == b"".join(
        map(bytes, plain.pack_command(*args))
    )
    pipeline = [args, ("PING",)]
    assert b"".join(map(bytes, packed.pack_commands(pipeline))) == b"".join(
        map(bytes, plain.pack_commands(pipeline))
    )


@pytest.mark.parametrize("bad", [True, None, object()])
def test_bad_arguments_raise_redis_pys_error(bad) -> None:
    with pytest.raises(DataError):
        hiredis_packing(aredis.Connection)().pack_command("SET", "k", bad)


def test_async_queues_use_it_sync_ones_keep_their_class() -> None:
    url = "redis://127.0.0.1:1/0"  # nothing connects: pools open connections lazily
    pool = AsyncQueue.from_url(url, "q").client.connection_pool
    assert pool.connection_class is hiredis_packing(aredis.Connection)
    assert issubclass(pool.connection_class, aredis.Connection)
    assert hiredis_packing(aredis.Connection) is pool.connection_class  # one subclass per class
    tls = AsyncQueue.from_url("rediss://127.0.0.1:1/0", "q").client.connection_pool
    assert issubclass(tls.connection_class, aredis.SSLConnection)
    assert Queue.from_url(url, "q").client.connection_pool.connection_class.__module__.startswith("redis")
