"""Client construction and start-up checks shared by the sync and async twins (no I/O here)."""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis import exceptions as redis_errors
from redis.asyncio.sentinel import MasterNotFoundError as AsyncMasterNotFoundError
from redis.sentinel import MasterNotFoundError

from ._errors import (
    ConnectionFailedError,
    ConveyorError,
    CredentialsRefusedError,
    PermissionDeniedError,
    PoolExhaustedError,
    ReplicationError,
    ServerConfigError,
    ServerError,
)
from ._glide_common import INFLIGHT
from ._models import QueueSettings
from ._scripts import Scripts

log = logging.getLogger("conveyor")


# Any option naming a password (password, ssl_password: a rediss URL's key file password), a user
# name or a token, with or without a prefix (sentinel_username, an auth_token).
_SECRET_QUERY = re.compile(r"(?i)(^|&)([^=&]*(?:password|username|user|pass|auth|token))=[^&]*")


def redact_url(url: str) -> str:
    """The URL without user name, password or credential query parameters, safe to print or store."""
    parts = urlsplit(url)
    if credentials_cut_short(url, parts.netloc):  # everything before the last '@' is credentials
        scheme, separator, rest = url.partition("://")
        return f"{scheme}{separator}{rest.rpartition('@')[2]}"
    query = hide_secret_options(parts.query)
    # The hosts as written after the credentials: a Cluster or Sentinel URL lists several, which
    # urllib cannot parse as one host and port (its .port raised ValueError, .hostname kept one).
    _, at, hosts = parts.netloc.rpartition("@")
    if not at and query == parts.query:
        return url
    return urlunsplit((parts.scheme, hosts, parts.path, query, parts.fragment))


def hide_secret_options(query: str) -> str:
    """A URL's query string with the values of its credential options replaced by ***."""
    return _SECRET_QUERY.sub(r"\1\2=***", query)


def credentials_cut_short(url: str, netloc: str) -> bool:
    """Whether an unencoded '/', '?' or '#' in the user name or password ended the address early:
    urllib then reads part of the password as a port, and its errors would echo it."""
    if "@" in netloc or "@" not in url.partition("://")[2]:
        return False
    for item in netloc.split(","):
        _, colon, port = item.rpartition(":")
        if colon and not item.endswith("]") and not port.isdigit():
            return True
    return False


def describe(connection_kwargs: dict[str, Any]) -> str:
    """Address of a pool's server for error messages: host:port/db or the socket path."""
    if "path" in connection_kwargs:
        return f"unix:{connection_kwargs['path']}"
    host = connection_kwargs.get("host", "localhost")
    port = connection_kwargs.get("port", 6379)
    return f"{host}:{port}/{connection_kwargs.get('db', 0)}"


def pool_options(settings: QueueSettings) -> dict[str, Any]:
    """Options of the bounded command pool built by ``from_url``."""
    return {
        "max_connections": settings.pool_size,
        "timeout": settings.pool_timeout,
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": settings.connect_timeout,
        "protocol": settings.protocol,
        "retry_on_timeout": False,
    }


def role_options(base: dict[str, Any], queue: str, role: str, block_timeout: float) -> dict[str, Any]:
    """Connection options of one worker role, named so CLIENT LIST shows who holds what.

    The waiter blocks in BZPOPMIN for up to ``block_timeout`` seconds, so its socket timeout must
    be longer than the block (redis-py would otherwise raise TimeoutError on a quiet queue).
    """
    options = {k: v for k, v in base.items() if k not in ("connection_pool", "client_name")}
    options["client_name"] = f"conveyor:{queue}:{role}"
    # The role's connections are Conveyor's own: read bytes even when the given client decodes.
    # Decoded, a payload that is not UTF-8 (pickle, msgpack) failed every claim after the server
    # had leased its jobs: the handler never ran and the job failed as 'lease expired'.
    options["decode_responses"] = False
    if role == "waiter":
        options["socket_timeout"] = block_timeout + 5.0
    return options


# What the servers (and the drivers quoting them) say when they refuse a login: the server was
# reached, so "cannot reach" would send an operator to check the network first.
_REFUSED_LOGIN = (
    "WRONGPASS",
    "invalid username-password pair",
    "NOAUTH",
    "Authentication required",
    "must be called with the client already authenticated",
)


# redis-py's cluster client, when no startup node gave it the slot map, then the last error
_NO_NODE = "Please provide at least one reachable node: "
# redis-py's words for a connection lost while a reply was awaited: the command had been sent
_LOST_MID_CALL = ("Connection closed by server.", "Error while reading from")
# redis-py's Sentinel connection, for a primary that answers READONLY (or UNBLOCKED) to a call
_DEMOTED = "The previous master is now a slave"


def outcome_unknown(read_only: bool) -> str:
    """What a call whose reply never came did: a read changed nothing, a write may have run."""
    if read_only:
        return "the call only reads, so nothing was changed (safe to repeat)"
    return "the call may have been applied or not (an enqueue with a job_id is safe to repeat)"


def connection_failed(where: str, exc: BaseException, read_only: bool = False) -> ConnectionFailedError:
    if isinstance(exc, redis_errors.AuthenticationError) or any(m in str(exc) for m in _REFUSED_LOGIN):
        return CredentialsRefusedError(
            f"the server at {where} refused the credentials: {exc} (check the URL's user and password)"
        )
    if _DEMOTED in str(exc):  # READONLY (or a blocking call ended): refused whole
        return ConnectionFailedError(
            f"the server at {where} is no longer the primary (a failover or switchover demoted it): "
            "the call was refused, not applied; the next call asks the Sentinels for the primary"
        )
    if any(m in str(exc) for m in _LOST_MID_CALL):  # a server that died, or a failover's CLIENT KILL
        return ConnectionFailedError(
            f"lost the connection to the server at {where} during the call ({exc}): "
            + outcome_unknown(read_only)
        )
    return ConnectionFailedError(f"cannot reach the server at {where}: {exc}")


def lost_replicas(exc: BaseException) -> bool:
    """A write the primary could not replicate: its WAIT fell short (``wait_replicas``), or it
    refused the write for lack of replicas (``min-replicas-to-write``). Behind Sentinel that is
    also how a primary replaced while it was out of reach looks once it is back."""
    return isinstance(exc, ReplicationError) or str(exc).startswith("NOREPLICAS")


def eviction_policy(info: Any) -> str:
    """The server's eviction policy from an INFO (or CONFIG GET) reply ('' when it has none).

    Redis and Valkey report ``maxmemory_policy``; Dragonfly reports it too (its CONFIG GET does
    not) and evicts only in ``cache_mode:cache``, which counts as an evicting policy here.
    """
    if isinstance(info, BaseException) or not info:
        return ""
    values = {_text(k): _text(v) for k, v in (info.items() if isinstance(info, dict) else _pairs(info))}
    if values.get("cache_mode") == "cache":
        return "cache_mode=cache"
    # (a CONFIG GET reply, still used on Redis Cluster, names it maxmemory-policy)
    return values.get("maxmemory_policy") or values.get("maxmemory-policy", "")


def check_policy(settings: QueueSettings, info: Any) -> None:
    """Warn (or raise in strict mode) unless the server's eviction policy is noeviction."""
    policy = eviction_policy(info)
    if not policy:
        log.warning("could not read maxmemory_policy from INFO (%s); make sure it is noeviction", info)
        return
    if policy == "noeviction":
        return
    # volatile-* evicts only keys with an expiry: none of the jobs, some of the bookkeeping
    evicted = (
        "the queue's keys that expire (a rate Limit's next start, a worker's ack record)"
        if policy.startswith("volatile-")
        else "queued jobs"
    )
    message = (
        f"the server's maxmemory-policy is {policy!r}: under memory pressure it can silently "
        f"evict {evicted}. Set `maxmemory-policy noeviction`."
    )
    if settings.strict:
        raise ServerConfigError(message)
    log.warning(message)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(reply: Any) -> list[tuple[Any, Any]]:
    items = list(reply)
    return list(zip(items[::2], items[1::2], strict=True))


def translate_error(
    where: str, exc: BaseException, pool_size: int | None, read_only: bool = False
) -> Exception:
    """Map redis-py errors to Conveyor's, naming the address (``where``) and never the credentials.
    ``read_only``: the call only reads (counts, get_job, jobs), so a lost reply changed nothing;
    said so, an operator need not check what a timed out ``conveyor info`` may have applied."""
    message = str(exc)
    if INFLIGHT in message:  # valkey-glide has no pool to wait for: one client, calls capped
        return PoolExhaustedError(
            f"more calls were in flight on the glide client of {where} than glide allows (1000): "
            "this one was not sent; lower the number of concurrent callers"
        )
    if "No connection available" in message or "Too many connections" in message:
        return PoolExhaustedError(
            f"all {pool_size or '?'} connections to {where} stayed busy; raise "
            "QueueSettings.pool_size (or pool_timeout) or lower the number of concurrent callers"
        )
    if message.startswith("CONVEYOR_") or "CONVEYOR_BOUND" in message:
        return ConveyorError(f"script refused: {message}")
    # (redis.asyncio's is its own class, not the sync one's subclass)
    if isinstance(exc, MasterNotFoundError | AsyncMasterNotFoundError):
        return no_primary(where, message)
    # CLUSTERDOWN, MASTERDOWN and redis-py's cluster retries running out ('TTL exhausted'): the
    # cluster cannot serve the call now, as when the server is out of reach.
    if isinstance(exc, redis_errors.ClusterError) and message.startswith("TTL exhausted"):
        # raised only after every attempt was redirected or refused before it ran
        return ConnectionFailedError(
            f"{where}: the call did not run: the node serving its slot kept refusing it with "
            "TRYAGAIN (the slot is being migrated to another node: a reshard) or redirecting it "
            f"(MOVED, ASK) until redis-py's cluster client gave up ({exc}); send it again"
        )
    if isinstance(exc, redis_errors.RedisClusterException | redis_errors.ClusterError):
        if any(m in message for m in _REFUSED_LOGIN):  # nodes reached, not "unreachable"
            reason = message.partition(_NO_NODE)[2] or message
            return CredentialsRefusedError(
                f"the nodes of {where} refused the credentials: {reason} (check the URL's user and password)"
            )
        return ConnectionFailedError(f"{where}: {exc}")
    if isinstance(exc, redis_errors.ConnectionError):
        return connection_failed(where, exc, read_only)
    if isinstance(exc, redis_errors.TimeoutError):  # not a ConnectionError in redis-py
        what = " the read" if read_only else ""
        return ConnectionFailedError(
            f"the server at {where} did not answer{what} within socket_timeout ({exc}): "
            f"{outcome_unknown(read_only)}"
        )
    denied = permission_denied(exc)
    if denied:
        return PermissionDeniedError(f"NOPERM: the server at {where} refused {denied} to this user ({exc})")
    if isinstance(exc, redis_errors.OutOfMemoryError) or "> 'maxmemory'" in message:
        # A script is refused at its first write that could grow memory, and only while it has
        # written nothing (the server cannot stop a script midway): the refused call changed nothing.
        return ServerError(
            f"the server at {where} is out of memory (used memory > maxmemory, policy noeviction) "
            f"and refused the call before it changed anything: raise maxmemory, or let workers "
            f"drain the queue ({exc})"
        )
    if isinstance(exc, redis_errors.ResponseError):  # any other error reply: a Conveyor error too
        return ServerError(f"the server at {where} answered with an error: {exc}")
    return exc if isinstance(exc, Exception) else RuntimeError(message)


def no_primary(where: str, message: str) -> ConnectionFailedError:
    """No Sentinel named a primary (redis-py's MasterNotFoundError ``message``). A URL's
    credentials go to the data nodes only, so Sentinels that require their own refuse it."""
    reasons = sentinel_reasons(message)
    if not any(m in message for m in _REFUSED_LOGIN):
        return ConnectionFailedError(f"no primary for {where}: {reasons}")
    return CredentialsRefusedError(
        f"no primary for {where}: Sentinels refused the login ({reasons}). A redis+sentinel URL's "
        "user and password are the data nodes'; for Sentinels that require their own, pass a "
        "client: Queue(name, Sentinel(hosts, sentinel_kwargs={'password': ...}, "
        "password=...).master_for(service))"
    )


_SENTINEL_ENTRY = re.compile(r", (?=<redis\.)")  # between the "<client repr> - error" entries
_SENTINEL_HOST = re.compile(r"\bhost=([^,()<>]+),port=(\d+)")
MAX_REASON = 200


def sentinel_reasons(message: str) -> str:
    """Why each Sentinel gave no primary, from redis-py's MasterNotFoundError message. That message
    quotes the repr of each Sentinel's client, pool and connection (every option, over 1,000
    characters a Sentinel): only each one's address and error are kept."""
    _, colon, tried = message.partition(" : ")
    if not colon:  # every Sentinel answered: none knows a primary that is up
        return (
            "no Sentinel reports a primary that is up for this service: check the service name (the "
            "name in the Sentinels' 'sentinel monitor <name> ...') and that its primary is up"
        )
    reasons = []
    for entry in _SENTINEL_ENTRY.split(tried):
        client, _, error = entry.rpartition("> - ")
        address = _SENTINEL_HOST.search(client)
        name = f"{address.group(1)}:{address.group(2)}" if address else ""
        name = f"{name}: " if name and name not in error else ""  # a connect error names it already
        reasons.append(name + (error if len(error) <= MAX_REASON else error[:MAX_REASON] + "..."))
    return "; ".join(reasons)


_SCRIPT_ACL = re.compile(r"ACL failure in script|can't run this command or subcommand script")
_NAMED = re.compile(r"'([\w|]+)' command")


def permission_denied(exc: BaseException) -> str:
    """What an ACL refused (a command by name, or key access), or '' if this is no ACL error.

    redis-py strips the NOPERM prefix; inside a script the reply is a plain error, and Redis 7.0
    names only the script and line, from which the command is read back out of our own source.
    """
    message = str(exc)
    if not (isinstance(exc, redis_errors.NoPermissionError) or _SCRIPT_ACL.search(message)):
        return ""
    if "access" in message and "key" in message:
        return "access to a key (the user's key pattern must cover <prefix>:{<queue>}:*)"
    named = _NAMED.search(message) or _script_line_command(message)
    return f"the command {named.group(1).upper()!r}" if named else "a command"


def _script_line_command(message: str) -> re.Match[str] | None:
    sha, line = re.search(r"\b([0-9a-f]{40})\b", message), re.search(r"@user_script:(\d+)", message)
    if not (sha and line):
        return None
    script = next((s.value for s in Scripts if s.value.sha == sha.group(1)), None)
    lines = script.source.splitlines() if script else []
    number = int(line.group(1))
    if not 0 < number <= len(lines):
        return None
    return re.search(r"redis\.p?call\(\s*'(\w+)'", lines[number - 1].replace('"', "'"))
