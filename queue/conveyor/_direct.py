"""Script calls straight on a pooled redis-py connection: the enqueue hot path.

redis-py's ``execute_command`` wraps every command in layers a Conveyor script call does not use:
a retry wrapper (Conveyor turns client retries off), per-command timing for redis-py's own
observability metrics, option handling, and a packer that checks every argument again in Python.
For a client whose behaviour is known (a plain ``redis.Redis`` or ``redis.asyncio.Redis`` on a
``ConnectionPool`` or ``BlockingConnectionPool``, not a single-connection client, UTF-8, hiredis
installed), a script call takes a connection from the pool, writes the command packed by hiredis,
reads the reply and gives the connection back: the same bytes on the wire, the same replies and
exceptions (NOSCRIPT included), and the connection disconnects itself on any error or
cancellation between the write and the read, as under ``execute_command``. That took about a
third of the client's instructions off a lone enqueue (callgrind). Every other client (Cluster,
Sentinel, valkey-glide, a subclass) keeps ``client.evalsha``. redis-py's own command metrics
(its OpenTelemetry support) do not see these calls.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio as aredis

from ._batching import IN_FLIGHT
from ._packing import pack_command

# get_connection() without a command name: redis-py >= 5.3 (5.2 requires one).
_MODERN = tuple(int(part) for part in redis.__version__.split(".")[:2]) >= (5, 3)


def _packed(sha: str, keys: Sequence[Any], args: Sequence[Any]) -> tuple[bytes]:
    return (pack_command(("EVALSHA", sha, len(keys), *keys, *args)),)


# The lone call's connection, plus the batcher's calls in flight and one other call: a pool with
# fewer connections never has one held (the held one would starve the others).
LONE_MIN_POOL = IN_FLIGHT + 2


def _roomy(direct: Any) -> Any:
    return direct if direct is not None and direct._pool.max_connections >= LONE_MIN_POOL else None


def _drop_unless_read(conn: Any, exc: BaseException) -> None:
    """Disconnect a sync connection a call left between its write and its read (an interrupt
    landing between the two, where redis-py's own handlers do not run): its reply would otherwise
    be read by the next call as that call's own. A server error reply was read whole."""
    if not isinstance(exc, redis.ResponseError):
        conn.disconnect()


class _Direct:
    """What both twins share: which clients qualify, and their pool."""

    __slots__ = ("_pool",)
    _KIND: type = redis.Redis
    _POOLS: tuple[type, ...] = (redis.ConnectionPool, redis.BlockingConnectionPool)

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    def of(cls, client: Any) -> Any:
        """A direct path on ``client``'s pool, or None when script calls must use ``client.evalsha``."""
        kind: Any = cls._KIND
        if pack_command is None or not _MODERN or type(client) is not kind:
            return None
        pool = client.connection_pool
        if type(pool) not in cls._POOLS or getattr(client, "connection", None) is not None:
            return None  # another pool type, or a single-connection client (its own lock)
        options = pool.connection_kwargs
        encoding = (options.get("encoding", "utf-8"), options.get("encoding_errors", "strict"))
        if encoding != ("utf-8", "strict"):
            return None  # hiredis packs str as strict UTF-8 only
        return cls(pool)


class DirectScripts(_Direct):
    """EVALSHA on a connection of a plain sync client's pool (see the module docstring)."""

    __slots__ = ()

    def evalsha(self, sha: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        packed, pool = _packed(sha, keys, args), self._pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command(packed)
            return conn.read_response()
        except BaseException as exc:
            _drop_unless_read(conn, exc)
            raise
        finally:
            pool.release(conn)


class HeldScripts(DirectScripts):
    """EVALSHA for one caller at a time (a sync ``Queue``'s script call whenever no other thread
    is using it, see ``take()``): the connection stays checked out between calls. The pool's
    checkout and release (its lock, queue and metrics records) cost a script call about 15 us of client CPU on
    a ``ConnectionPool`` and 20 on a ``BlockingConnectionPool``, where the call itself (held)
    costs about 13 (a trivial script, 5 x 5,000 calls, one run on Valkey 9.1; a lone enqueue
    went from 9,700 to 13,200 calls/s). What the pool checks at checkout is
    kept: a connection with unread data or closed by the server (``can_read``) is reconnected
    before the call, so an idle period or a server restart costs no more error than through the
    pool. On any error or interruption during the call the connection goes back to the pool
    (redis-py disconnected it first if the error came between the write and the read). A child
    process never uses its parent's connection: after a fork, the next call takes one from the
    pool (which redis-py resets in the child)."""

    __slots__ = ("__weakref__", "_conn", "_detached", "_lock", "_pid")

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._conn: Any = None
        self._pid = 0
        self._lock = threading.Lock()
        self._detached = False  # close() ran while a thread had it: that thread puts it back
        _HELD.add(self)

    def take(self) -> bool:
        """Reserve the held connection for one call (then ``give()``), unless another thread
        has it: that caller goes through the pool instead of waiting."""
        return self._lock.acquire(blocking=False)

    def give(self) -> None:
        if self._detached:
            self._detached = False
            self.put_back()
        self._lock.release()

    def close(self) -> None:
        """Before the pool closes: give the held connection back, unless a thread's call is
        using it. Handed back then, a call made after close() (redis-py reopens connections)
        could take it while the first call still reads its reply: two callers on one socket.
        That thread gives it back when its call ends (``give``)."""
        if self.take():
            try:
                self.put_back()
            finally:
                self.give()
        else:
            self._detached = True

    def _after_fork(self) -> None:
        # A thread of the parent may have had it reserved; the child has no such thread.
        self._lock = threading.Lock()
        self._detached = False

    @classmethod
    def of(cls, client: Any) -> Any:
        return _roomy(super().of(client))

    def evalsha(self, sha: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        packed = _packed(sha, keys, args)
        conn = self._ready_connection()
        try:
            conn.send_packed_command(packed)
            return conn.read_response()
        except BaseException as exc:
            _drop_unless_read(conn, exc)
            self.put_back()
            raise

    def _ready_connection(self) -> Any:
        conn = self._conn
        if conn is None or self._pid != os.getpid():
            self._conn, self._pid = self._pool.get_connection(), os.getpid()
            return self._conn
        try:
            stale = conn.can_read()  # unread data, or EOF: the server closed it
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            stale = True
        if stale:
            try:
                conn.disconnect()
                conn.connect()
            except BaseException:
                self.put_back()
                raise
        return conn

    def put_back(self) -> None:
        """Give the held connection back to the pool (also before closing the pool)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            self._pool.release(conn)


_HELD: weakref.WeakSet[HeldScripts | AsyncLoneScripts] = weakref.WeakSet()  # reset in a forked child


def _reset_after_fork() -> None:
    for held in list(_HELD):
        held._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class AsyncDirectScripts(_Direct):
    """EVALSHA on a connection of a plain asyncio client's pool (see the module docstring)."""

    __slots__ = ()
    _KIND = aredis.Redis
    _POOLS = (aredis.ConnectionPool, aredis.BlockingConnectionPool)

    async def evalsha(self, sha: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        packed, pool = _packed(sha, keys, args), self._pool
        conn = await pool.get_connection()
        try:
            await conn.send_packed_command(packed)
            return await conn.read_response()
        finally:
            await pool.release(conn)

    async def put_back(self) -> None:
        """Nothing is held between calls here (see ``AsyncHeldScripts``)."""

    async def close(self) -> None:
        """Before the pool closes (see ``AsyncHeldScripts.close``)."""


class AsyncHeldScripts(AsyncDirectScripts):
    """EVALSHA for one caller at a time (a worker's pump): the connection stays checked out
    between calls, sparing each call the pool's lock, can-read check and metrics records. On any
    error or cancellation it goes back to the pool at once (redis-py disconnects it first if the
    error came between the write and the read), so a half-read connection is never reused. The
    caller puts it back (``put_back``) before anything else needs the pool (a role client's pool
    has one connection) and before idling (a connection the server closes while idle would
    otherwise fail the next call instead of being replaced by the pool's check)."""

    __slots__ = ("_calling", "_conn", "_detached")

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._conn: Any = None
        self._calling = False
        self._detached = False  # put back when the call in flight ends (error, or close())

    _CHECKS = False  # whether a held connection is checked before each call (see _ready_connection)

    async def evalsha(self, sha: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        self._calling = True
        try:
            conn = self._conn
            if conn is None or self._CHECKS:  # (no extra coroutine on the worker pump's path)
                conn = await self._ready_connection()
            await conn.send_packed_command(_packed(sha, keys, args))
            return await conn.read_response()
        except BaseException:
            self._detached = True
            raise
        finally:
            self._calling = False
            if self._detached:
                self._detached = False
                await self.put_back()

    async def _ready_connection(self) -> Any:
        if self._conn is None:
            self._conn = await self._pool.get_connection()
        return self._conn

    async def put_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._pool.release(conn)

    async def close(self) -> None:
        """Before the pool closes: give the held connection back, unless a call is using it.
        Handed back then, a call made after aclose() (redis-py reopens connections) could take
        it while the first call still reads its reply: two callers on one socket. That call
        gives it back when it ends."""
        if self._calling:
            self._detached = True
        else:
            await self.put_back()


class AsyncLoneScripts(AsyncHeldScripts):
    """EVALSHA for one task at a time (an ``AsyncQueue``'s script call whenever no other task of
    its event loop is using it, see ``take()``): as ``HeldScripts`` for the sync
    ``Queue``. The pool's checkout and release are awaited coroutines with a lock and metrics
    records: a trivial script call cost 129 us of client CPU
    through the pool and 72 held (5 x 5,000 calls, one run on Valkey 9.1, a loaded machine). Each
    call first runs the pool's own check (``ensure_connection``), so a connection behaves as one
    just taken from the pool. A child process never uses its parent's connection. (An asyncio
    client belongs to the event loop it first ran in, held or not: redis-py's rule.)"""

    __slots__ = ("__weakref__", "_busy", "_pid")

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._pid = 0
        self._busy = False
        _HELD.add(self)

    @classmethod
    def of(cls, client: Any) -> Any:
        return _roomy(super().of(client))

    def take(self) -> bool:
        """Reserve the held connection for one call (then ``give()``), unless another task has
        it: that caller goes through the pool instead of waiting. (One event loop: no lock.)"""
        if self._busy:
            return False
        self._busy = True
        return True

    def give(self) -> None:
        self._busy = False

    def _after_fork(self) -> None:
        self._busy = False
        self._calling = self._detached = False

    _CHECKS = True

    async def _ready_connection(self) -> Any:
        if self._conn is not None and self._pid != os.getpid():
            self._conn = None  # the parent's: this process's pool was reset by redis-py
        if self._conn is None:
            self._conn, self._pid = await self._pool.get_connection(), os.getpid()
        else:
            await self._pool.ensure_connection(self._conn)  # on error: put back by evalsha
        return self._conn

    async def put_back(self) -> None:
        if self._pid != os.getpid():
            self._conn = None
        await super().put_back()
