"""The valkey-glide driver: glide clients behind the subset of redis-py's API that Conveyor uses.

The seam between Conveyor and a driver is that subset (see :data:`SEAM`): script calls
(``evalsha``, ``script_load``), a non-transactional ``pipeline`` of a few reads plus EVALSHA and
WAIT, the blocking wait on the marker (``bzpopmin``, ``zadd``), a few reads (``hgetall``, ``hmget``,
``zcard``, list/zset ranges, ``info``, ``config_get``), connection naming (per worker role) and
``close``. Errors come out as redis-py's exception classes, so error handling is shared.

Scripts run with glide's ``invoke_script`` (EVALSHA, loading the script itself on NOSCRIPT);
inside a batch glide has no script call (valkey-io/valkey-glide#4018), so EVALSHA is sent as a
custom command and a NOSCRIPT reply is handled by the caller, as with redis-py.

Differences, each explicit: one multiplexed connection per client instead of a pool
(``pool_size``/``pool_timeout`` do not apply); one server only (Cluster, Sentinel and ``unix://``
URLs raise :class:`ConveyorError`); of the URL options only ``ssl_ca_certs`` and
``ssl_cert_reqs=none`` are read (others raise). glide never re-sends a command on its own here:
Conveyor passes no retry settings, and its reconnect backoff only reopens the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from redis import exceptions as redis_errors

from ._errors import ConveyorError
from ._models import QueueSettings
from ._scripts import Scripts

SEAM = (
    *("evalsha", "script_load", "pipeline", "execute_command"),  # scripts, batches
    *("bzpopmin", "zadd"),  # the blocking wait on the marker
    *("hgetall", "hmget", "zcard", "lrange", "zrange", "zrevrange", "info", "config_get"),
    "xread",  # the result reader's blocking read (on a connection of its own)
    *("close", "aclose", "set_retry"),
)
_SOURCES = {s.value.sha: s.value.source for s in Scripts}
_URL_OPTIONS = ("ssl_ca_certs", "ssl_cert_reqs")


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConveyorError(
            f"driver 'glide' needs {name.replace('_', '-')} (pip install 'conveyor[glide]'): {exc}"
        ) from exc


def glide_config(glide: Any, url: str, settings: QueueSettings, name: str | None, timeout: float) -> Any:
    """A lazily connecting glide configuration for one server named by a redis:// or rediss:// URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConveyorError(
            f"driver 'glide' supports redis:// and rediss:// URLs to one server, not {parts.scheme}:// "
            "(Cluster, Sentinel and unix sockets need driver 'redis-py')"
        )
    options = dict(parse_qsl(parts.query))
    unknown = sorted(set(options) - set(_URL_OPTIONS))
    if unknown:
        raise ConveyorError(f"driver 'glide' does not read the URL option(s) {', '.join(unknown)}")
    tls = None
    if parts.scheme == "rediss" and options:
        ca = options.get("ssl_ca_certs")
        tls = glide.TlsAdvancedConfiguration(
            use_insecure_tls=options.get("ssl_cert_reqs", "").lower() == "none" or None,
            root_pem_cacerts=Path(ca).read_bytes() if ca else None,
        )
    credentials = None
    if parts.password is not None or parts.username:
        credentials = glide.ServerCredentials(
            unquote(parts.password or ""), unquote(parts.username) if parts.username else None
        )
    return glide.GlideClientConfiguration(
        [glide.NodeAddress(parts.hostname or "localhost", parts.port or 6379)],
        use_tls=parts.scheme == "rediss",
        credentials=credentials,
        request_timeout=max(1, round(timeout * 1000)),
        client_name=name,
        database_id=int(parts.path.strip("/") or 0),
        protocol=glide.ProtocolVersion.RESP3 if settings.protocol == 3 else glide.ProtocolVersion.RESP2,
        lazy_connect=True,
        advanced_config=glide.AdvancedGlideClientConfiguration(
            connection_timeout=max(1, round(settings.connect_timeout * 1000)), tls_config=tls
        ),
    )


def _arg(value: Any) -> str | bytes:
    return value if isinstance(value, (str, bytes)) else str(value)


def _args(values: Sequence[Any]) -> list[str | bytes]:
    return [_arg(v) for v in values]


_UNREACHABLE = ("connect failed", "IoError", "Connection refused")
_KINDS = {
    "NoScriptError": redis_errors.NoScriptError,
    "ResponseError": redis_errors.ResponseError,
    "ExecAbortError": redis_errors.ExecAbortError,
}


def redis_error(exc: BaseException) -> Exception:
    """The redis-py exception a glide error stands for (message kept, glide's preamble dropped)."""
    kind = type(exc).__name__
    message = str(exc)
    if kind == "TimeoutError":
        return redis_errors.TimeoutError(message)
    if kind in ("ConnectionError", "ClosingError") or any(m in message for m in _UNREACHABLE):
        return redis_errors.ConnectionError(message)
    head, sep, detail = message.partition(": - ")
    if sep and head.startswith("An error was signalled by the server"):
        name, _, text = detail.partition(": ")
        return _KINDS.get(name, redis_errors.ResponseError)(text or detail)
    if message.startswith("NOPERM"):
        return redis_errors.NoPermissionError(message.removeprefix("NOPERM").lstrip(": "))
    return redis_errors.ResponseError(message)


def _entries(reply: Any) -> Any:
    """glide's {entry id: [[field, value], ...]} as redis-py's RESP2 [[entry id, [f, v, ...]], ...]."""
    if not isinstance(reply, dict):
        return reply
    return [[entry, [x for pair in pairs for x in pair]] for entry, pairs in reply.items()]


def reshape(command: str, reply: Any) -> Any:
    """A custom command's reply in the shape redis-py gives: glide turns stream replies into maps."""
    name = command.upper()
    if name in ("XRANGE", "XREVRANGE"):
        return _entries(reply)
    if name == "XREAD" and isinstance(reply, dict):
        return [[stream, _entries(entries)] for stream, entries in reply.items()]
    return reply


def _xread_args(streams: dict[str, str], count: int | None, block: int | None) -> list[Any]:
    args: list[Any] = ["XREAD"]
    args += ["COUNT", count] if count is not None else []
    args += ["BLOCK", block] if block is not None else []
    return [*args, "STREAMS", *streams, *streams.values()]


def _info(reply: Any) -> Any:
    """INFO text as the dict redis-py returns (only the fields Conveyor reads need to be right)."""
    if not isinstance(reply, (bytes, str)):
        return reply
    text = reply.decode() if isinstance(reply, bytes) else reply
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
    return {key: value for key, value in pairs}


class Pipeline:
    """A non-atomic glide Batch filled through redis-py's pipeline method names."""

    def __init__(self, owner: Any, batch: Any) -> None:
        self._owner, self._batch = owner, batch
        self._post: list[Callable[[Any], Any]] = []

    def _add(self, post: Callable[[Any], Any] = lambda r: r) -> Any:
        self._post.append(post)
        return self._batch

    def hsetnx(self, key: str, field: str, value: Any) -> None:
        self._add().hsetnx(key, field, _arg(value))

    def hget(self, key: str, field: str) -> None:
        self._add().hget(key, field)

    def get(self, key: str) -> None:
        self._add().get(key)

    def hgetall(self, key: str) -> None:
        self._add().hgetall(key)

    def hmget(self, key: str, fields: Sequence[str]) -> None:
        self._add().hmget(key, list(fields))

    def llen(self, key: str) -> None:
        self._add().llen(key)

    def zcard(self, key: str) -> None:
        self._add().zcard(key)

    def info(self) -> None:
        self._add(_info).info()

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> None:
        self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def execute_command(self, *args: Any) -> None:
        self._add(lambda reply: reshape(str(args[0]), reply)).custom_command(_args(args))

    def results(self, replies: list[Any] | None, raise_on_error: bool) -> list[Any]:
        """Replies in redis-py's shapes; errors raised (first one) or returned in place."""
        out = [
            redis_error(r) if isinstance(r, Exception) else post(r)
            for r, post in zip(replies or [], self._post, strict=True)
        ]
        error = next((r for r in out if isinstance(r, Exception)), None)
        if raise_on_error and error is not None:
            raise error
        return out


class GlideDriver:
    """What the sync and async adapters share: configuration, naming and the address."""

    driver = "glide"
    module = "glide_sync"

    def __init__(self, url: str, settings: QueueSettings, name: str | None = None, timeout: float = 0.0):
        self.url, self.settings, self.client_name = url, settings, name
        self._glide = _module(self.module)
        self._config = glide_config(self._glide, url, settings, name, timeout or settings.socket_timeout)
        parts = urlsplit(url)
        self.address = f"{parts.hostname}:{parts.port or 6379}/{parts.path.strip('/') or 0}"

    def role(self, queue: str, role: str, block_timeout: float) -> Any:
        """A new client (own connection) for a worker role, named ``conveyor:<queue>:<role>``; the
        waiter's request timeout outlasts its block."""
        blocks = role in ("waiter", "")
        timeout = block_timeout + 5.0 if blocks else self.settings.socket_timeout
        return type(self)(self.url, self.settings, f"conveyor:{queue}:{role}" if role else None, timeout)

    def set_retry(self, retry: Any) -> None:
        """Nothing to turn off: glide does not re-send a command that timed out."""

    def _script(self, sha: str) -> Any:
        scripts: dict[str, Any] = self.__dict__.setdefault("_scripts", {})
        if sha not in scripts:
            scripts[sha] = self._glide.Script(_SOURCES[sha])
        return scripts[sha]


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
                raise redis_errors.ConnectionError(f"the client of {self.address} is closed")
            self._inflight += 1
        try:
            return getattr(self._client, method)(*args)
        except Exception as exc:
            raise redis_error(exc) from exc
        finally:
            with self._state:
                self._inflight -= 1
                self._state.notify_all()

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

    def _blocking_call(self, method: str, *args: Any) -> Any:
        if self._id is None:  # asked once, for close() to unblock this connection
            self._id = ""  # an ACL refusing CLIENT ID: close() lets the block run out instead
            with contextlib.suppress(redis_errors.ResponseError):
                self._id = self.execute_command("CLIENT", "ID")
        self._blocking = True
        try:
            return self._call(method, *args)
        finally:
            self._blocking = False

    def bzpopmin(self, keys: str | Sequence[str], timeout: float) -> Any:
        return self._blocking_call("bzpopmin", _key_list(keys), timeout)

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
        short-lived connection; where the server or ACL refuses it, the block runs out instead."""
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
        self._creating: asyncio.Lock | None = None

    async def _connected(self) -> Any:
        """The client, created on first use; outside ``_call``'s error mapping, as a refusal to
        connect here (:func:`idle_reply_loop`) is Conveyor's, not a server's."""
        if self._client is None:
            self._creating = self._creating or asyncio.Lock()
            async with self._creating:
                if self._client is None:
                    try:
                        client = await self._glide.GlideClient.create(self._config)
                    except Exception as exc:
                        raise redis_error(exc) from exc
                    stalled = idle_reply_loop(asyncio.get_running_loop())
                    if stalled is not None:
                        await client.close()
                        raise ConveyorError(stalled)
                    self._client = client
        return self._client

    async def _call(self, method: str, *args: Any) -> Any:
        client = self._client if self._client is not None else await self._connected()
        try:
            return await getattr(client, method)(*args)
        except Exception as exc:
            raise redis_error(exc) from exc

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
        if self._client is not None:
            await self._client.close()
        if "_reader" in self.__dict__:
            await self._reader.aclose()


class AsyncPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        replies = await self._owner._call("exec", self._batch, False)
        return self.results(replies, raise_on_error)


def _key_list(keys: str | Sequence[str]) -> list[str]:
    """redis-py's bzpopmin takes one key or several; glide always a list."""
    return [keys] if isinstance(keys, str) else list(keys)


def glide_client(is_async: bool, url: str, settings: QueueSettings) -> GlideDriver:
    """The command client of a queue (a multiplexed connection; ``pool_size`` does not apply)."""
    return (GlideAsync if is_async else GlideSync)(url, settings)
