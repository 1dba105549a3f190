"""The valkey-glide driver's synchronous client (valkey-glide-sync; see _glide.py)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from redis import exceptions as redis_errors

from ._glide_common import (
    _SOURCES,
    NO_SELECT,
    GlideDriver,
    Pipeline,
    _args,
    _info,
    _key_list,
    _xread_args,
    closed_error,
    redis_error,
    reshape,
)

# The longest BZPOPMIN on a connection close() cannot unblock (CLIENT ID refused, as by acl_rules()):
# a close then ends the wait within one slice, instead of waiting socket_timeout and leaving the
# connection blocked and the waiter's thread alive until the block ran out.
BLOCK_SLICE = 1.0


class GlideSync(GlideDriver):
    """valkey-glide-sync behind redis-py's synchronous method names (thread-safe, multiplexed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._id: Any = None
        self._blocking = self._closed = False
        self._inflight = 0
        self._state = threading.Condition()
        try:
            self._client = self._glide.GlideClient.create(self._config)
        except Exception as exc:
            raise redis_error(exc) from exc

    def _call(self, method: str, *args: Any) -> Any:
        with self._state:  # close() waits for calls in flight: glide aborts closing under one
            if self._closed:
                raise closed_error(self.address)
            self._inflight += 1
        try:
            return getattr(self._client, method)(*args)
        except Exception as exc:
            error = self._select_refused(redis_error(exc)) if NO_SELECT in str(exc) else redis_error(exc)
            if isinstance(error, redis_errors.ConnectionError | redis_errors.TimeoutError):
                self._id = None  # glide reconnects, under another id: close() would unblock a stale one
            raise error from exc
        finally:
            with self._state:
                self._inflight -= 1
                self._state.notify_all()

    def _select_refused(self, error: Exception) -> Exception:
        """The server's reply to SELECT of the URL's DB index (see ``select_probe``), else ``error``."""
        probe, db = self.select_probe()
        try:
            probe.execute_command("SELECT", db)
        except redis_errors.ResponseError as exc:  # NOPERM too
            return exc
        except redis_errors.RedisError:
            pass
        finally:
            probe.close()
        return error

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        keys, args = _args(keys_and_args[:numkeys]), _args(keys_and_args[numkeys:])
        if sha in _SOURCES:
            return self._call("invoke_script", self._script(sha), keys, args)
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def script_load(self, source: str) -> Any:
        return self.execute_command("SCRIPT", "LOAD", source)

    def execute_command(self, *args: Any) -> Any:
        return reshape(str(args[0]), self._call("custom_command", _args(args)))

    def xread(self, streams: dict[str, str], count: int | None = None, block: int | None = None) -> Any:
        """XREAD on a connection of its own: a block on this multiplexed one would stall every call."""
        reader = self.__dict__.get("_reader")
        if reader is None:
            reader = self._reader = self.role("", "", (block or 0) / 1000)
        return reshape(
            "XREAD", reader._blocking_call("custom_command", _args(_xread_args(streams, count, block)))
        )

    def pipeline(self, transaction: bool = False) -> SyncPipeline:
        return SyncPipeline(self, self._glide.Batch(is_atomic=transaction))

    def _client_id(self) -> Any:
        """This connection's id, for close() to unblock it; '' where the ACL refuses CLIENT ID."""
        if self._id is None:  # asked once
            self._id = ""
            with contextlib.suppress(redis_errors.ResponseError):
                self._id = self.execute_command("CLIENT", "ID")
        return self._id

    def _blocking_call(self, method: str, *args: Any) -> Any:
        self._client_id()
        self._blocking = True
        try:
            return self._call(method, *args)
        finally:
            self._blocking = False

    def bzpopmin(self, keys: str | Sequence[str], timeout: float) -> Any:
        """BZPOPMIN; in slices of BLOCK_SLICE where close() could not unblock it (no CLIENT ID)."""
        if self._client_id():
            return self._blocking_call("bzpopmin", _key_list(keys), timeout)
        deadline = time.monotonic() + timeout if timeout else math.inf  # 0: no limit
        while True:
            left = deadline - time.monotonic()
            reply = self._blocking_call("bzpopmin", _key_list(keys), min(BLOCK_SLICE, max(left, 0.001)))
            if reply is not None or left <= BLOCK_SLICE:
                return reply

    def zadd(self, key: str, mapping: dict[str, float]) -> Any:
        return self._call("zadd", key, mapping)

    def hgetall(self, key: str) -> Any:
        return self._call("hgetall", key)

    def hmget(self, key: str, fields: Sequence[str]) -> Any:
        return self._call("hmget", key, list(fields))

    def zcard(self, key: str) -> Any:
        return self._call("zcard", key)

    def lrange(self, key: str, start: int, stop: int) -> Any:
        return self._call("lrange", key, start, stop)

    def zrange(self, key: str, start: int, stop: int) -> Any:
        return self.execute_command("ZRANGE", key, start, stop)

    def zrevrange(self, key: str, start: int, stop: int) -> Any:
        return self.execute_command("ZREVRANGE", key, start, stop)

    def info(self) -> Any:
        return _info(self._call("info"))

    def config_get(self, name: str) -> Any:
        return self._call("config_get", [name])

    def close(self) -> None:
        """Close the client. Closing does not end a BZPOPMIN another thread is blocked in (it
        would return at its timeout), so that one is ended with CLIENT UNBLOCK from a second,
        short-lived connection; where the ACL refuses CLIENT ID, the block was sliced (BLOCK_SLICE)
        and ends with its slice."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        if self._blocking and self._id:
            other = GlideSync(self.url, self.settings)
            with contextlib.suppress(redis_errors.RedisError):
                other.execute_command("CLIENT", "UNBLOCK", self._id)
            other.close()
        with self._state:
            idle = self._state.wait_for(lambda: not self._inflight, self.settings.socket_timeout)
        if idle:  # else leave the connection to the process exit rather than abort
            self._client.close()
        if "_reader" in self.__dict__:
            self._reader.close()


class SyncPipeline(Pipeline):
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        replies = self._owner._call("exec", self._batch, False)
        return self.results(replies, raise_on_error)
