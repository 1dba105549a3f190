"""Which deployment a client talks to (one server, Sentinel, Cluster) and how to build clients for it.

URLs: ``redis://`` / ``rediss://`` name one server; ``redis+cluster://h1:p1,h2:p2`` names Cluster
startup nodes; ``redis+sentinel://h1:p1,h2:p2/<service>[/<db>]`` names Sentinels and the service they
watch (``rediss+`` variants use TLS to the data nodes). Credentials and query options apply to the
data nodes. Only construction lives here; the twins do the I/O. Sync and asyncio clients differ only
in their classes, gathered in a ``Flavour``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio as aredis
import redis.asyncio.cluster as acluster
import redis.asyncio.connection as aconnection
import redis.asyncio.sentinel as asentinel
from redis import cluster, connection, sentinel
from redis.asyncio.connection import SSLConnection as ASSLConnection
from redis.connection import SSLConnection, parse_url

from ._connection import (
    credentials_cut_short,
    describe,
    hide_secret_options,
    pool_options,
    redact_url,
    role_options,
    translate_error,
)
from ._errors import InvalidNameError
from ._glide import GlideDriver, glide_client
from ._glide_common import CERT_REQS
from ._models import QueueSettings
from ._packing import hiredis_packing

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SENTINEL_SCHEMES = {"redis+sentinel": "redis", "rediss+sentinel": "rediss"}
SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES, *SENTINEL_SCHEMES)


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed URL: ``kind`` is single, cluster or sentinel; ``url`` is a plain redis(s) URL."""

    kind: str
    url: str
    hosts: tuple[tuple[str, int], ...] = ()
    service: str = ""


def parse_target(url: str) -> Target:
    """Split a Conveyor URL into the deployment kind, its hosts and a plain URL for the data nodes."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidNameError(f"unsupported URL scheme {parts.scheme!r}; use one of {', '.join(SCHEMES)}")
    if credentials_cut_short(url, parts.netloc):
        raise InvalidNameError(
            f"URL {_redacted(url)} does not parse: percent-encode '/', '?', '#' and '@' in its user "
            "name and password"
        )
    address = parts.netloc.rpartition("@")[2]
    if any(char.isspace() or not char.isprintable() for char in address):
        raise InvalidNameError(f"URL {_redacted(url)} has a space or control character in its host")
    plain = CLUSTER_SCHEMES.get(scheme) or SENTINEL_SCHEMES.get(scheme)
    if plain is None:
        if scheme != "unix":  # a unix URL's path is its socket
            _check_db(parts.path.strip("/"), url)
        return Target("single", url)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    hosts = tuple(_host_port(item, url) for item in hostlist.split(",") if item)
    if not hosts:
        raise InvalidNameError(f"{scheme} URL names no host: {_redacted(url)}")
    path = parts.path.strip("/").split("/") if parts.path.strip("/") else []
    service, db = "", "/".join(path)
    if scheme in SENTINEL_SCHEMES:
        if not path:
            raise InvalidNameError(f"Sentinel URL needs the service name as its path: {_redacted(url)}")
        service, db = path[0], "/".join(path[1:])
    _check_db(db, url)
    if scheme in CLUSTER_SCHEMES and db.strip("0"):
        raise InvalidNameError(f"URL {_redacted(url)} names database {db!r}: Cluster has only database 0")
    netloc = (userinfo + "@" if userinfo else "") + f"{hosts[0][0]}:{hosts[0][1]}"
    kind = "cluster" if scheme in CLUSTER_SCHEMES else "sentinel"
    return Target(kind, urlunsplit((plain, netloc, "/" + db, parts.query, "")), hosts, service)


def check_options(plain: str, url: str) -> None:
    """Refuse query options redis-py would hand on unchecked: a misspelt name reached the
    connection and failed the first call with a TypeError, and a protocol other than 2 or 3
    failed as "cannot reach the server". ``plain`` is the target's redis(s):// or unix:// URL."""
    if not urlsplit(plain).query:
        return
    options = parse_url(plain)  # type: ignore[no-untyped-call]  # ValueError naming a bad value
    known = _connection_options(options.pop("connection_class", connection.Connection).__name__)
    for name in options:
        if name not in known and name.startswith("sentinel_"):  # not the data nodes' 'password'
            raise InvalidNameError(
                f"URL {_redacted(url)} has option {name!r}: a URL's options are the data nodes'; "
                "give the Sentinels' own in a client, Sentinel(hosts, sentinel_kwargs={...})"
                ".master_for(service)"
            )
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidNameError(
                f"URL {_redacted(url)} has option {name!r}{hint}: not an option of redis-py's connections"
            )
    if options.get("protocol", 2) not in (2, 3):
        raise InvalidNameError(f"URL {_redacted(url)} asks for protocol {options['protocol']}: use 2 or 3")
    if options.get("ssl_cert_reqs", "none") not in CERT_REQS:  # else a bare RedisError at connect
        raise InvalidNameError(
            f"URL {_redacted(url)} has ssl_cert_reqs={options['ssl_cert_reqs']!r}: use {', '.join(CERT_REQS)}"
        )


@functools.cache
def _connection_options(class_name: str) -> frozenset[str]:
    """What a sync or asyncio connection of that class, or its pool, takes from a URL."""
    names = set(connection.URL_QUERY_ARGUMENT_PARSERS)
    for module in (connection, aconnection):
        for cls in getattr(module, class_name).__mro__:
            if "__init__" in cls.__dict__:
                names.update(inspect.signature(cls.__init__).parameters)
    return frozenset(names - {"self", "args", "kwargs"})


def check_url(url: object) -> None:
    """Refuse, with no I/O, a URL that no client could be built from (so an app refuses it at once)."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str such as 'redis://localhost:6379/0', not {type(url).__name__}")
    target = parse_target(url)
    parse_url(target.url)  # type: ignore[no-untyped-call]  # ValueError naming a bad option
    check_options(target.url, url)


def _check_db(db: str, url: str) -> None:
    """Refuse a database path that is not a number: redis-py ignores it and uses db 0."""
    if db and not (db.isascii() and db.isdigit()):
        raise InvalidNameError(
            f"URL {_redacted(url)} names database {db!r}: the path after host:port must be a database "
            "number (0, 1, ...) or nothing (database 0)"
        )


def _host_port(item: str, url: str) -> tuple[str, int]:
    host, _, port = item.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidNameError(f"{item!r} is not host:port in {_redacted(url)}")
    return host.strip("[]"), int(port)


def _redacted(url: str) -> str:
    """``url`` with everything before its last '@' hidden (a password with an unencoded '/'
    included) and the values of its credential options (password=, ssl_password=, ...); plain
    string work, so a URL too broken to parse is still named."""
    scheme, separator, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    address, question, query = rest.partition("?")
    return f"{scheme}{separator}{address}{question}{hide_secret_options(query)}"


@dataclass(frozen=True, slots=True)
class Flavour:
    """The redis-py classes of one I/O style."""

    redis: Any
    blocking_pool: Any
    pool: Any
    cluster: Any
    node: Any
    sentinel: Any
    sentinel_pool: Any


SYNC = Flavour(
    redis.Redis,
    redis.BlockingConnectionPool,
    redis.ConnectionPool,
    cluster.RedisCluster,
    cluster.ClusterNode,
    sentinel.Sentinel,
    sentinel.SentinelConnectionPool,
)
ASYNC = Flavour(
    aredis.Redis,
    aredis.BlockingConnectionPool,
    aredis.ConnectionPool,
    acluster.RedisCluster,
    acluster.ClusterNode,
    asentinel.Sentinel,
    asentinel.SentinelConnectionPool,
)


def is_cluster(client: Any) -> bool:
    return isinstance(client, (cluster.RedisCluster, acluster.RedisCluster))


def is_sentinel(client: Any) -> bool:
    pool = getattr(client, "connection_pool", None)
    return isinstance(pool, (sentinel.SentinelConnectionPool, asentinel.SentinelConnectionPool))


def connect(flavour: Flavour, url: str, settings: QueueSettings) -> Any:
    """A client for ``url`` with Conveyor's pool and timeout settings (no I/O for async).

    The sync cluster client reads the slot map as it is built: its errors are translated here.
    """
    target = parse_target(url)
    if settings.driver == "glide":
        return glide_client(flavour is ASYNC, url, settings)
    check_options(target.url, url)
    try:
        return _connect(flavour, target, url, settings)
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        hosts = ",".join(f"{host}:{port}" for host, port in target.hosts)
        label = "Redis Cluster via" if target.kind == "cluster" else "server at"
        raise translate_error(f"{label} {hosts or redact_url(url)}", exc, None) from exc


def _connect(flavour: Flavour, target: Target, url: str, settings: QueueSettings) -> Any:
    options = pool_options(settings)
    if target.kind == "single":
        pool = flavour.blocking_pool.from_url(url, **options)
        if flavour is ASYNC:  # redis-py's asyncio connections pack commands in Python
            pool.connection_class = hiredis_packing(pool.connection_class)
        return flavour.redis.from_pool(pool)
    options.pop("timeout")  # a blocking-pool option; Cluster and Sentinel pools do not wait
    if target.kind == "cluster":
        options.pop("retry_on_timeout")  # not an option of the asyncio cluster client
        nodes = [flavour.node(host, port) for host, port in target.hosts]
        return _cluster_client(flavour, target.url, startup_nodes=nodes, **options)
    node_options = _node_options(target.url)
    manager = flavour.sentinel(
        list(target.hosts),
        sentinel_kwargs=_sentinel_options(settings),
        **{k: v for k, v in node_options.items() if k != "db"},
    )
    return manager.master_for(
        target.service, redis_class=flavour.redis, db=node_options.get("db", 0), **options
    )


def _node_options(url: str) -> dict[str, Any]:
    """redis-py's reading of a plain URL, with TLS as ``ssl=True`` (what Sentinel pools expect)."""
    options: dict[str, Any] = dict(parse_url(url))  # type: ignore[no-untyped-call]
    if options.pop("connection_class", None) is SSLConnection:
        options["ssl"] = True
    return options


def _sentinel_options(settings: QueueSettings) -> dict[str, Any]:
    return {"socket_timeout": settings.connect_timeout, "socket_connect_timeout": settings.connect_timeout}


def _cluster_client(flavour: Flavour, url: str | None, **options: Any) -> Any:
    if url is not None:
        options = {**_node_options(url), **options}
        options.pop("db", None)  # Cluster has only db 0
    connection_class = options.pop("connection_class", None)
    if connection_class is not None and issubclass(connection_class, (SSLConnection, ASSLConnection)):
        options["ssl"] = True
    accepted = _parameters(flavour.cluster)
    if accepted is not None:  # the asyncio client takes no **kwargs: drop what it would refuse
        options = {k: v for k, v in options.items() if k in accepted}
    return flavour.cluster(**options)


@functools.cache
def _parameters(cls: type) -> frozenset[str] | None:
    params = inspect.signature(cls).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params)


def role_client(flavour: Flavour, client: Any, queue: str, role: str, block_timeout: float) -> Any:
    """A new client with one dedicated connection for a worker role, of the same deployment.

    Cluster: a cluster client (it follows MOVED/ASK and refreshes its slot map after a failover);
    Sentinel: ``master_for`` the same service (it asks the Sentinels for the primary on reconnect);
    one server: a one-connection pool with the command pool's options.
    """
    if isinstance(client, GlideDriver):
        return client.role(queue, role, block_timeout)
    if is_cluster(client):
        options = role_options(dict(client.get_connection_kwargs()), queue, role, block_timeout)
        options["max_connections"] = 1
        known = [*client.nodes_manager.startup_nodes.values(), *client.get_nodes()]
        nodes = [flavour.node(n.host, n.port) for n in {n.name: n for n in known}.values()]
        return _cluster_client(flavour, None, startup_nodes=nodes, **options)
    pool = client.connection_pool
    options = role_options(pool.connection_kwargs, queue, role, block_timeout)
    options.update(connection_class=pool.connection_class, max_connections=1)
    if is_sentinel(client):
        manager = pool.sentinel_manager
        return manager.master_for(pool.service_name, redis_class=flavour.redis, **options)
    return flavour.redis.from_pool(flavour.pool(**options))


def ask_for_primary(client: Any) -> Any:
    """Behind Sentinel, ask the Sentinels which server is the primary now (a coroutine for an
    asyncio client); None otherwise. redis-py asks only when it opens a connection: a pooled one
    to a primary failed over while it was paused or cut off, and back, stays in use until Sentinel
    demotes it (seconds later). If the primary changed, redis-py closes the pool's idle
    connections to the old one, and the others as they come back, so the next call goes to the
    new primary."""
    return client.connection_pool.get_master_address() if is_sentinel(client) else None


def node_of(client: Any, key: str) -> dict[str, Any]:
    """Keyword arguments that send a keyless command (CLIENT ID, CONFIG GET) to ``key``'s node."""
    return {"target_nodes": client.get_node_from_key(key)} if is_cluster(client) else {}


def _host_and_port(connection_kwargs: dict[str, Any]) -> str:
    return f"{connection_kwargs.get('host', 'localhost')}:{connection_kwargs.get('port', 26379)}"


def where(client: Any) -> str:
    """What a client talks to, for error messages (addresses and service names, never credentials)."""
    if isinstance(client, GlideDriver):
        return client.address
    if is_cluster(client):
        return "Redis Cluster via " + ",".join(sorted(client.nodes_manager.startup_nodes))
    pool: Any = getattr(client, "connection_pool", None)
    if is_sentinel(client):
        managed = pool.sentinel_manager.sentinels
        # host:port: a Sentinel has no database (describe's /0 read as the data's database)
        sentinels = ",".join(_host_and_port(s.connection_pool.connection_kwargs) for s in managed)
        return f"Sentinel service {pool.service_name!r} (Sentinels {sentinels})"
    return describe(getattr(pool, "connection_kwargs", {}))
