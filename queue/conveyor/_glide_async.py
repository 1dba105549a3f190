"""The valkey-glide driver's asyncio client (valkey-glide; see _glide.py)."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from typing import Any

from redis import exceptions as redis_errors

from ._errors import ConveyorError
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
    closed_in_flight,
    redis_error,
    reshape,
)


def idle_reply_loop(loop: asyncio.AbstractEventLoop) -> str | None:
    """Why glide's asyncio replies cannot reach a client created on ``loop``, or None.

    valkey-glide (asyncio, 2.5 and later) hands every reply of the process to one pipe, read by the
    event loop of the first glide client created there; that reader moves to another loop only
    once its loop is closed. While that loop is open but not running, replies to clients of every
    other loop wait, their request timeouts too (valkey-io/valkey-glide#7122). glide has no public
    name for that loop: without its module attribute (older glide), nothing is checked.
    """
    owner = getattr(importlib.import_module("glide.glide_client"), "_async_pipe_loop", None)
    if owner is None or owner is loop or owner.is_running() or owner.is_closed():
        return None
    return (
        "driver 'glide' (asyncio): valkey-glide delivers every reply of this process through the "
        "event loop of the first glide client created in it, and that loop is open but not running, "
        "so this event loop's commands would wait forever (valkey-io/valkey-glide#7122). Close that "
        "loop or keep it running, create glide clients on one loop, or use driver 'redis-py'"
    )


class GlideAsync(GlideDriver):
    """valkey-glide (asyncio) behind redis-py's asyncio method names; the client is created on the
    first call, inside the event loop that uses it."""

    module = "glide"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: Any = None
        self._closed = False
        self._creating: asyncio.Lock | None = None

    async def _connected(self) -> Any:
        """The client, created on first use; outside ``_call``'s error mapping, as a refusal to
        connect here (``idle_reply_loop()``) is Conveyor's, not a server's."""
        if self._client is None:
            self._creating = self._creating or asyncio.Lock()
            async with self._creating:
                if self._client is None:
                    if self._closed:  # aclose() ran while another call created it
                        raise closed_error(self.address)
                    try:
                        client = await self._glide.GlideClient.create(self._config)
                    except Exception as exc:
                        raise redis_error(exc) from exc
                    stalled = idle_reply_loop(asyncio.get_running_loop())
                    if stalled is not None:
                        await client.close()
                        raise ConveyorError(stalled)
                    if self._closed:  # aclose() ran while it was created: not kept, nor used
                        await client.close()
                        raise closed_error(self.address)
                    self._client = client
        return self._client

    async def _call(self, method: str, *args: Any) -> Any:
        if self._closed:
            raise closed_error(self.address)
        client = self._client if self._client is not None else await self._connected()
        try:
            return await getattr(client, method)(*args)
        except Exception as exc:
            if self._closed:  # aclose() ended it: not 'cannot reach the server', retried for ever
                raise closed_in_flight(self.address) from exc
            error = redis_error(exc)
            raise (await self._select_refused(error) if NO_SELECT in str(exc) else error) from exc

    async def _select_refused(self, error: Exception) -> Exception:
        """The server's reply to SELECT of the URL's DB index (see ``select_probe``), else ``error``."""
        probe, db = self.select_probe()
        try:
            await probe.execute_command("SELECT", db)
        except redis_errors.ResponseError as exc:  # NOPERM too
            return exc
        except redis_errors.RedisError:
            pass
        finally:
            await probe.aclose()
        return error

    async def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        keys, args = _args(keys_and_args[:numkeys]), _args(keys_and_args[numkeys:])
        if sha in _SOURCES:
            return await self._call("invoke_script", self._script(sha), keys, args)
        return await self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    async def script_load(self, source: str) -> Any:
        return await self.execute_command("SCRIPT", "LOAD", source)

    async def execute_command(self, *args: Any) -> Any:
        return reshape(str(args[0]), await self._call("custom_command", _args(args)))

    async def xread(self, streams: dict[str, str], count: int | None = None, block: int | None = None) -> Any:
        """XREAD on a connection of its own: a block on this multiplexed one would stall every call."""
        reader = self.__dict__.get("_reader")
        if reader is None:
            reader = self._reader = self.role("", "", (block or 0) / 1000)
        return await reader.execute_command(*_xread_args(streams, count, block))

    def pipeline(self, transaction: bool = False) -> AsyncPipeline:
        return AsyncPipeline(self, self._glide.Batch(is_atomic=transaction))

    async def bzpopmin(self, keys: str | Sequence[str], timeout: float) -> Any:
        return await self._call("bzpopmin", _key_list(keys), timeout)

    async def zadd(self, key: str, mapping: dict[str, float]) -> Any:
        return await self._call("zadd", key, mapping)

    async def hgetall(self, key: str) -> Any:
        return await self._call("hgetall", key)

    async def hmget(self, key: str, fields: Sequence[str]) -> Any:
        return await self._call("hmget", key, list(fields))

    async def zcard(self, key: str) -> Any:
        return await self._call("zcard", key)

    async def lrange(self, key: str, start: int, stop: int) -> Any:
        return await self._call("lrange", key, start, stop)

    async def zrange(self, key: str, start: int, stop: int) -> Any:
        return await self.execute_command("ZRANGE", key, start, stop)

    async def zrevrange(self, key: str, start: int, stop: int) -> Any:
        return await self.execute_command("ZREVRANGE", key, start, stop)

    async def info(self) -> Any:
        return _info(await self._call("info"))

    async def config_get(self, name: str) -> Any:
        return await self._call("config_get", [name])

    async def aclose(self) -> None:
        self._closed = True
        if self._client is not None:
            await self._client.close()
        if "_reader" in self.__dict__:
            await self._reader.aclose()


class AsyncPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        replies = await self._owner._call("exec", self._batch, False)
        return self.results(replies, raise_on_error)
