"""Servers the user runs elsewhere: described from INFO, credentials never shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
from conveyor import redact_url

from bench.servers.catalog import ServerUnavailable
from bench.servers.launcher import _family_from_info, _read_info, _version_from_info


@dataclass(frozen=True, eq=False)
class ExternalServer:
    """A server the user runs elsewhere; we read what it is from INFO and never print secrets.

    `url` is kept only in memory so the benchmark can connect; repr, `display_url` and
    `record()` carry the redacted form.
    """

    kind: str
    display_url: str
    version: str
    family: str
    allocator: str | None
    info: dict[str, Any]
    url: str  # full URL, possibly with a password: never print or record it

    config: str = "external"
    flags: tuple[str, ...] = ()
    mode: str | None = None
    threads: int | None = None

    def __repr__(self) -> str:
        return f"<ExternalServer {self.kind} {self.display_url} {self.family} {self.version}>"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new redis-py client for this server (caller closes it)."""
        kwargs.setdefault("socket_timeout", 10)
        return redis.Redis.from_url(self.url, **kwargs)

    def record(self) -> dict[str, Any]:
        """What a results file stores about this server (no credentials)."""
        return {
            "id": self.kind, "family": self.family, "version": self.version,
            "allocator": self.allocator, "config": self.config, "flags": [],
            "mode": self.mode, "threads": self.threads,
        }  # fmt: skip


def connect_external(url: str, name: str | None = None) -> ExternalServer:
    """Describe the server at `url` from its INFO; errors name the redacted address only."""
    shown = redact_url(url)
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    try:
        info = _read_info(client)
    except redis.RedisError as exc:
        raise ServerUnavailable(f"cannot reach {shown}: {exc.__class__.__name__}") from None
    finally:
        client.close()
    family = _family_from_info(info)
    alloc = info.get("mem_allocator")
    return ExternalServer(
        kind=name or f"external-{family}", display_url=shown, version=_version_from_info(info),
        family=family, allocator=str(alloc) if alloc is not None else None, info=info, url=url,
    )  # fmt: skip


def is_empty(url: str) -> bool:
    """True when the database in `url` holds no keys: the only external DB we may flush unasked."""
    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
    try:
        return int(client.dbsize()) == 0
    except redis.RedisError as exc:
        shown = redact_url(url)
        raise ServerUnavailable(f"cannot reach {shown}: {exc.__class__.__name__}") from None
    finally:
        client.close()
