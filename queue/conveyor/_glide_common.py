"""What the valkey-glide driver's sync and async clients share: configuration from the URL,
error mapping to redis-py's classes, reply shapes, the batch adapter and naming (see _glide.py)."""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from redis import exceptions as redis_errors

from ._errors import ConveyorError, QueueClosedError
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
_HOST = "localhost"  # of a URL naming none (redis://:6379), as with redis-py
# glide Script objects, one per (glide module, sha), kept for the life of the process. A Script's
# __del__ calls into cffi under cffi's lock, which is not re-entrant: a Script freed by the cyclic
# GC while the same thread was inside cffi (glide casting an error reply) deadlocked that thread,
# and every glide call of the process after it (a clean-clone CI run hung 300 s). Never freed,
# a Script never runs that __del__ while the process works.
_SCRIPT_OBJECTS: dict[tuple[str, str], Any] = {}
_SCRIPT_LOCK = threading.Lock()


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
    tls = _tls(glide, options) if parts.scheme == "rediss" and options else None
    if parts.scheme == "redis" and options:  # redis-py refuses these too: no TLS to apply them to
        raise ConveyorError(f"URL option(s) {', '.join(sorted(options))} need a rediss:// URL (TLS)")
    credentials = None
    if parts.username and not parts.password:  # glide sends no AUTH with an empty password
        raise ConveyorError(
            "driver 'glide' cannot log in as the URL's user without a password (it would run as the "
            "default user): give the password, or use driver 'redis-py'"
        )
    if parts.password is not None or parts.username:
        credentials = glide.ServerCredentials(
            unquote(parts.password or ""), unquote(parts.username) if parts.username else None
        )
    return glide.GlideClientConfiguration(
        [glide.NodeAddress(parts.hostname or _HOST, _port(parts.port))],
        use_tls=parts.scheme == "rediss",
        credentials=credentials,
        request_timeout=_ms(timeout),
        client_name=name,
        database_id=int(parts.path.strip("/") or 0),
        protocol=glide.ProtocolVersion.RESP3 if settings.protocol == 3 else glide.ProtocolVersion.RESP2,
        lazy_connect=True,
        reconnect_strategy=glide.BackoffStrategy(*_CONNECT_RETRY),
        advanced_config=glide.AdvancedGlideClientConfiguration(
            connection_timeout=_ms(settings.connect_timeout), tls_config=tls
        ),
    )


def _port(port: int | None) -> int:
    """The URL's port, 6379 where it names none: a port 0 (refused, as with redis-py) is not none."""
    return 6379 if port is None else port


def _ms(seconds: float) -> int:
    """A timeout in glide's milliseconds: at least 1, at most its u32 (2**32-1 ms, ~49.7 days),
    which settings accept more than (up to 1e9 s) and glide refused ('Value out of range')."""
    return min(max(1, round(seconds * 1000)), 2**32 - 1)


def _tls(glide: Any, options: dict[str, str]) -> Any:
    """The TLS configuration of the URL options; an ``ssl_cert_reqs`` glide cannot honour is refused
    (any value but 'none' verified the certificate in silence, a misspelt 'none' too)."""
    reqs, ca = options.get("ssl_cert_reqs", "required").lower(), options.get("ssl_ca_certs")
    if reqs not in CERT_REQS:  # 'optional' verifies: a TLS client's is required
        problem = f"URL option ssl_cert_reqs={reqs!r}: driver 'glide' reads none, optional or required"
        raise ConveyorError(problem)
    return glide.TlsAdvancedConfiguration(
        use_insecure_tls=reqs == "none" or None, root_pem_cacerts=_read_ca(ca) if ca else None
    )


def _read_ca(path: str) -> bytes:
    """The CA file's PEM certificates. One without any (empty, DER, a wrong file) glide refused as
    a bare error out of the constructor, or took as a TLS failure, 'timed out' at connect_timeout."""
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        problem = f"URL option ssl_ca_certs names {path}, which cannot be read: {exc.strerror}"
        raise ConveyorError(problem) from exc
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ConveyorError(f"URL option ssl_ca_certs names {path}, which holds no PEM certificate")
    return pem


def _arg(value: Any) -> str | bytes:
    return value if isinstance(value, (str, bytes)) else str(value)


def _args(values: Sequence[Any]) -> list[str | bytes]:
    return [_arg(v) for v in values]


# The ssl_cert_reqs values of a URL, as redis-py names ssl.CERT_*: both drivers read these only.
CERT_REQS = ("none", "optional", "required")
# glide's connect: one retry, after ~0.5 s. Its default (5 retries, 0.2 s to 3.2 s apart) outlasted
# connect_timeout, so a refused connection or a refused SELECT of the URL's DB index surfaced only as
# 'timed out' after connect_timeout. The same setting spaces glide's reconnects of a lost connection:
# every ~0.5 s, two attempts a second per client (one retry after 0.2 s would make it five).
_CONNECT_RETRY = (1, 250, 2)  # glide's BackoffStrategy(num_of_retries, factor ms, exponent_base)
_SIGNALLED = "An error was signalled by the server: - "
# glide's preamble of a failed connect, before the cause ('Connection refused (os error 111)'):
# the address is Conveyor's message's own
_CONNECT_FAILED = re.compile(r"^(Standalone connect failed - )?(IoError: )?Received error for address .*?: ")
NO_SELECT = "refused to switch database"
# a server reply's code as glide quotes it ('WRONGTYPE: Operation ...'); the server, and redis-py,
# write 'WRONGTYPE Operation ...'
_SERVER_CODE = re.compile(r"^([A-Z]+): ")
# glide refuses a call past its limit of calls in flight on one client (1000) before sending it
INFLIGHT = "Reached maximum inflight requests"
_TERMINATED = "Multiplexed connection driver unexpectedly terminated"  # see _connect_hint
_UNREACHABLE = ("connect failed", "IoError", "Connection refused")
# glide's name for a server error's kind (the reply's first word read by glide)
_KINDS: dict[str, type[Exception]] = {
    "NoScriptError": redis_errors.NoScriptError,
    "ResponseError": redis_errors.ResponseError,
    "ExecAbortError": redis_errors.ExecAbortError,
    "PermissionDenied": redis_errors.NoPermissionError,  # NOPERM
    "BusyLoadingError": redis_errors.BusyLoadingError,  # LOADING: a ConnectionError in redis-py
    "ClusterDown": redis_errors.ClusterDownError,  # CLUSTERDOWN: the call did not run
    "MasterDown": redis_errors.MasterDownError,  # MASTERDOWN: a replica lost its primary
    "TryAgain": redis_errors.TryAgainError,  # TRYAGAIN: keys of a call mid-migration
    "ReadOnly": redis_errors.ReadOnlyError,  # READONLY: a write sent to a replica
}


def redis_error(exc: BaseException) -> Exception:
    """The redis-py exception a glide error stands for (message kept, glide's preamble dropped)."""
    kind = type(exc).__name__
    message = str(exc).strip()  # glide ends some with a newline, which split a log line in two
    if kind == "TimeoutError":
        return redis_errors.TimeoutError(message)
    if kind in ("ConfigurationError", "ValueError"):  # glide's own refusal: no server was asked
        return ConveyorError(f"driver 'glide' refused the client's configuration or a call: {message}")
    head, sep, detail = message.partition(_SIGNALLED)
    # a server's error reply, also one that failed glide's connect (glide sends INFO there: an ACL
    # refusing it was 'cannot reach the server', retried for ever, instead of NOPERM naming INFO)
    name, _, text = detail.strip().partition(": ")
    if sep and (not head or name == "PermissionDenied"):
        return _KINDS.get(name, redis_errors.ResponseError)(text or detail.strip())
    if NO_SELECT in message:  # the SELECT of the URL's DB index, sent by glide as it connects
        return redis_errors.ResponseError(
            "DB index is out of range, or SELECT is refused to this user (the server refused to "
            "switch to the URL's database)"
        )
    if INFLIGHT in message:  # not sent: translate_error makes it a PoolExhaustedError
        return redis_errors.ConnectionError(message)
    if kind in ("ConnectionError", "ClosingError") or any(m in message for m in _UNREACHABLE):
        # a reply that failed the connect (maxclients) in the server's words, as redis-py quotes it
        said = (text or detail.strip()) if sep else _CONNECT_FAILED.sub("", message)
        return redis_errors.ConnectionError(_connect_hint(said))
    if message.startswith("NOPERM"):
        return redis_errors.NoPermissionError(message.removeprefix("NOPERM").lstrip(": "))
    return redis_errors.ResponseError(_SERVER_CODE.sub(r"\1 ", message, count=1))


def _connect_hint(message: str) -> str:
    """glide's message, with the likely cause where glide names none: a server at its maxclients
    limit answers a new connection 'max number of clients reached' and closes it, which glide
    reports as its connection driver 'unexpectedly terminated', dropping the server's reply."""
    if _TERMINATED not in message:
        return message
    return (
        f"{message} (the server closed the connection as it opened: most likely it has reached its "
        "maxclients limit, 'max number of clients reached')"
    )


def closed_error(address: str) -> QueueClosedError:
    """A call after close(): redis-py reopens a connection, glide's closed client cannot. Not a
    ConnectionFailedError, which a worker or a result wait would retry for ever. Nothing was sent."""
    return QueueClosedError(
        f"the queue's glide client of {address} was closed (close() or aclose()) and cannot be used "
        "again: this call was not sent; create a new Queue or AsyncQueue",
        maybe_applied=False,
    )


def closed_in_flight(where: str, read_only: bool = False) -> QueueClosedError:
    """A call in flight when close() / aclose() closed its connection (either driver): it may have
    been sent, so it may have been applied or not; a read (``read_only``) changed nothing either
    way. Not 'cannot reach the server' (a ConnectionFailedError, which a worker or a result wait
    would retry for ever)."""
    if read_only:
        return QueueClosedError(
            f"the queue was closed (close() or aclose()) while this read from {where} was in flight: "
            "the call only reads, so nothing was changed (safe to repeat, on an open queue)",
            maybe_applied=False,
        )
    return QueueClosedError(
        f"the queue was closed (close() or aclose()) while this call to {where} was in flight: it "
        "may have been applied or not (an enqueue with a job_id is safe to repeat, on an open queue)",
        maybe_applied=True,
    )


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
        self._names: list[str] = []  # each call's command name, for the error naming the failed one

    def _add(self, name: str, post: Callable[[Any], Any] = lambda r: r) -> Any:
        self._names.append(name)
        self._post.append(post)
        return self._batch

    def hsetnx(self, key: str, field: str, value: Any) -> None:
        self._add("HSETNX").hsetnx(key, field, _arg(value))

    def hget(self, key: str, field: str) -> None:
        self._add("HGET").hget(key, field)

    def get(self, key: str) -> None:
        self._add("GET").get(key)

    def hgetall(self, key: str) -> None:
        self._add("HGETALL").hgetall(key)

    def hmget(self, key: str, fields: Sequence[str]) -> None:
        self._add("HMGET").hmget(key, list(fields))

    def llen(self, key: str) -> None:
        self._add("LLEN").llen(key)

    def zcard(self, key: str) -> None:
        self._add("ZCARD").zcard(key)

    def zrange(self, key: str, start: int, stop: int) -> None:
        self.execute_command("ZRANGE", key, start, stop)

    def zrevrange(self, key: str, start: int, stop: int) -> None:
        self.execute_command("ZREVRANGE", key, start, stop)

    def info(self) -> None:
        self._add("INFO", _info).info()

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> None:
        self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def execute_command(self, *args: Any) -> None:
        name = str(args[0])
        self._add(name.upper(), lambda reply: reshape(name, reply)).custom_command(_args(args))

    def results(self, replies: list[Any] | None, raise_on_error: bool) -> list[Any]:
        """Replies in redis-py's shapes; errors raised (first one) or returned in place."""
        out = [
            redis_error(r) if isinstance(r, Exception) else post(r)
            for r, post in zip(replies or [], self._post, strict=True)
        ]
        failed = next((n for n, r in enumerate(out) if isinstance(r, Exception)), None)
        if raise_on_error and failed is not None:
            raise self._named(failed, out[failed])
        return out

    def _named(self, index: int, error: Exception) -> Exception:
        """A server error as redis-py raises it from a pipeline, naming the failed call by position
        and command name (not its arguments: they hold payloads, and AUTH or CONFIG SET secrets)."""
        if isinstance(error, redis_errors.ResponseError) and error.args:
            prefix = f"Command # {index + 1} ({self._names[index]}) of pipeline caused error: "
            error.args = (prefix + str(error.args[0]), *error.args[1:])
        return error


class GlideDriver:
    """What the sync and async adapters share: configuration, naming and the address."""

    driver = "glide"
    module = "glide_sync"

    def __init__(self, url: str, settings: QueueSettings, name: str | None = None, timeout: float = 0.0):
        self.url, self.settings, self.client_name = url, settings, name
        self._glide = _module(self.module)
        self._config = glide_config(self._glide, url, settings, name, timeout or settings.socket_timeout)
        parts = urlsplit(url)
        self.address = f"{parts.hostname or _HOST}:{_port(parts.port)}/{parts.path.strip('/') or 0}"

    def role(self, queue: str, role: str, block_timeout: float) -> Any:
        """A new client (own connection) for a worker role, named ``conveyor:<queue>:<role>``; the
        waiter's request timeout outlasts its block."""
        blocks = role in ("waiter", "")
        timeout = block_timeout + 5.0 if blocks else self.settings.socket_timeout
        return type(self)(self.url, self.settings, f"conveyor:{queue}:{role}" if role else None, timeout)

    def select_probe(self) -> tuple[Any, str]:
        """A client of database 0 and the URL's DB index, to send that SELECT once more: glide's
        connect says only 'refused to switch database', the server's reply says why (an index out
        of range, or NOPERM), as redis-py reports it."""
        parts = urlsplit(self.url)
        return type(self)(urlunsplit(parts._replace(path="/0")), self.settings), parts.path.strip("/")

    def set_retry(self, retry: Any) -> None:
        """Nothing to turn off: glide does not re-send a command that timed out."""

    def _script(self, sha: str) -> Any:
        """The process-wide glide Script of ``sha`` (see ``_SCRIPT_OBJECTS``)."""
        key = (self.module, sha)
        script = _SCRIPT_OBJECTS.get(key)
        if script is None:
            with _SCRIPT_LOCK:  # one Script per key: a second one, dropped, would run __del__
                if key not in _SCRIPT_OBJECTS:
                    _SCRIPT_OBJECTS[key] = self._glide.Script(_SOURCES[sha])
                script = _SCRIPT_OBJECTS[key]
        return script


def _key_list(keys: str | Sequence[str]) -> list[str]:
    """redis-py's bzpopmin takes one key or several; glide always a list."""
    return [keys] if isinstance(keys, str) else list(keys)
