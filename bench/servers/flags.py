"""Command-line flags of each server family for a configuration (Redis/Valkey, Dragonfly)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bench.servers.catalog import (
    CONFIGS,
    DRAGONFLY_MODES,
    HOST,
    NotApplicable,
    ServerKind,
    UnknownServerKind,
    get_kind,
)


def _check_choice(value: str, choices: Sequence[str], what: str) -> None:
    """Reject unknown configuration / mode names with the list of valid ones."""
    if value not in choices:
        raise UnknownServerKind(f"unknown {what} {value!r}; known: {', '.join(choices)}")


def _redis_flags(config: str, port: int, data_dir: Path) -> list[str]:
    """argv (without the binary) for Redis/Valkey: loopback, noeviction, persistence per config."""
    flags = [
        "--port", str(port), "--bind", HOST, "--dir", str(data_dir),
        "--daemonize", "no", "--save", "", "--maxmemory-policy", "noeviction",
        # Lets tests use DEBUG (e.g. DEBUG SLEEP) from loopback; no effect on speed.
        "--enable-debug-command", "local",
    ]  # fmt: skip
    if config.startswith("aof-"):
        flags += ["--appendonly", "yes", "--appendfsync", config.removeprefix("aof-")]
    else:
        flags += ["--appendonly", "no"]
    if config == "listpack-1024":
        flags += ["--hash-max-listpack-value", "1024"]
    return flags


@functools.cache
def _dragonfly_flag_names(binary: Path) -> frozenset[str]:
    """Flag names this Dragonfly build knows (names changed between releases)."""
    out = subprocess.run(
        [str(binary), "--helpfull"], capture_output=True, text=True, timeout=30, check=False
    )
    return frozenset(re.findall(r"-{1,2}([a-z_0-9]+)\s", out.stdout + out.stderr))


def _dragonfly_flags(
    config: str, mode: str, *, threads: int, port: int, data_dir: Path, binary: Path | None
) -> list[str]:
    """argv for Dragonfly: loopback, no snapshots, no eviction, the locking mode and threads."""
    if config.startswith("aof-"):
        raise NotApplicable(f"dragonfly: {config} not applicable (Dragonfly has no AOF)")
    flags = [
        f"--port={port}", f"--bind={HOST}", f"--dir={data_dir}", "--dbfilename=",
        "--cache_mode=false", f"--proactor_threads={threads}", f"--log_dir={data_dir}",
    ]  # fmt: skip
    if mode == "hashtag":
        flags += ["--cluster_mode=emulated", "--lock_on_hashtags"]
    else:
        flags += ["--default_lua_flags=allow-undeclared-keys"]
    if config == "listpack-1024":
        known = _dragonfly_flag_names(binary) if binary else frozenset({"listpack_max_field_len"})
        name = next((n for n in ("listpack_max_field_len", "max_map_field_len") if n in known), "")
        if not name:
            raise NotApplicable("dragonfly: this build has no listpack field-length flag")
        flags.append(f"--{name}=1024")
    return flags


def build_flags(
    kind: str | ServerKind,
    config: str = "default",
    *,
    port: int,
    data_dir: Path,
    dragonfly_mode: str = "hashtag",
    threads: int | None = None,
    binary: Path | None = None,
) -> list[str]:
    """The argv (without the binary path) a server of `kind` gets for `config`; pure, testable."""
    k = get_kind(kind)
    _check_choice(config, CONFIGS, "configuration")
    if k.family == "dragonfly":
        _check_choice(dragonfly_mode, DRAGONFLY_MODES, "dragonfly mode")
        nthreads = threads if threads is not None else (os.cpu_count() or 1)
        return _dragonfly_flags(
            config, dragonfly_mode, threads=nthreads, port=port, data_dir=data_dir, binary=binary
        )
    return _redis_flags(config, port, data_dir)
