"""Launcher logic that needs no running server: names, flags, URL redaction, skip reasons."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import servers
from bench.servers import (
    KINDS,
    NotApplicable,
    ServerUnavailable,
    UnknownServerKind,
    available,
    build_flags,
    get_kind,
    locate,
    redact_url,
    start_server,
)


@pytest.fixture(autouse=True)
def _fresh_locate_cache() -> Iterator[None]:
    """locate() caches per process; tests that change PATH/env must not see or leave stale hits."""
    servers.catalog._locate_checked.cache_clear()
    yield
    servers.catalog._locate_checked.cache_clear()


def test_catalog_has_the_five_kinds() -> None:
    assert [k.id for k in KINDS] == [
        "valkey-9.1",
        "valkey-8.1",
        "redis-8.2",
        "redis-7.0",
        "dragonfly",
    ]


def test_unknown_kind_raises_a_clear_error() -> None:
    with pytest.raises(UnknownServerKind, match=r"unknown server kind 'redis-9'.*valkey-9\.1"):
        get_kind("redis-9")
    with pytest.raises(UnknownServerKind, match="unknown server kind"):
        locate("nope")
    with pytest.raises(UnknownServerKind, match="unknown server kind"), start_server("nope"):
        pass


def test_unknown_config_and_mode_raise() -> None:
    with pytest.raises(UnknownServerKind, match=r"configuration 'fast'.*aof-always"):
        build_flags("valkey-9.1", "fast", port=1, data_dir=Path("/tmp"))
    with pytest.raises(UnknownServerKind, match="dragonfly mode 'x'"):
        build_flags("dragonfly", port=1, data_dir=Path("/tmp"), dragonfly_mode="x")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@db.example:6380/2", "redis://db.example:6380/2"),
        ("rediss://alice:s3cret@db.example/0", "rediss://db.example/0"),
        ("redis://h:1/0?password=s3cret&protocol=3", "redis://h:1/0?password=***&protocol=3"),
        ("redis://u:p%40ss@h:1/0", "redis://h:1/0"),
    ],
)
def test_redact_url_strips_credentials(url: str, expected: str) -> None:
    red = redact_url(url)
    assert red == expected
    assert "s3cret" not in red and "alice" not in red


def test_redis_flags_default_are_safe() -> None:
    flags = build_flags("redis-7.0", port=4242, data_dir=Path("/d"))
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs["--port"] == "4242"
    assert pairs["--bind"] == "127.0.0.1"
    assert pairs["--save"] == ""
    assert pairs["--appendonly"] == "no"
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert pairs["--dir"] == "/d"


@pytest.mark.parametrize("fsync", ["everysec", "always"])
def test_redis_flags_aof(fsync: str) -> None:
    flags = build_flags("valkey-8.1", f"aof-{fsync}", port=1, data_dir=Path("/d"))
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs["--appendonly"] == "yes"
    assert pairs["--appendfsync"] == fsync


def test_dragonfly_flags_by_mode() -> None:
    hashtag = build_flags("dragonfly", port=7, data_dir=Path("/d"), threads=2)
    assert {"--cluster_mode=emulated", "--lock_on_hashtags"} <= set(hashtag)
    assert {
        "--port=7",
        "--bind=127.0.0.1",
        "--dir=/d",
        "--dbfilename=",
        "--proactor_threads=2",
    } <= set(hashtag)
    glob = build_flags("dragonfly", port=7, data_dir=Path("/d"), dragonfly_mode="global", threads=1)
    assert "--default_lua_flags=allow-undeclared-keys" in glob
    assert "--lock_on_hashtags" not in glob
    lp = build_flags("dragonfly", "listpack-1024", port=7, data_dir=Path("/d"), threads=1)
    assert "--listpack_max_field_len=1024" in lp


@pytest.mark.parametrize("config", ["aof-everysec", "aof-always"])
def test_dragonfly_aof_is_not_applicable(config: str) -> None:
    with pytest.raises(NotApplicable, match="no AOF"):
        build_flags("dragonfly", config, port=7, data_dir=Path("/d"))


def _empty_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH with nothing on it, so only what a test puts there is found."""
    monkeypatch.setenv("PATH", str(tmp_path))


def test_dragonfly_absent_gives_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DRAGONFLY_BIN", raising=False)
    _empty_path(monkeypatch, tmp_path)
    with pytest.raises(ServerUnavailable, match="DRAGONFLY_BIN") as info:
        locate("dragonfly")
    assert "dragonfly" in info.value.reason
    assert dict(available())["dragonfly"] == info.value.reason


def test_dragonfly_bin_not_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRAGONFLY_BIN", str(tmp_path / "missing"))
    with pytest.raises(ServerUnavailable, match="not an executable"):
        locate("dragonfly")


def test_redis_70_absent_says_apt_get(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _empty_path(monkeypatch, tmp_path)
    with pytest.raises(ServerUnavailable, match="apt-get install redis-server"):
        locate("redis-7.0")


def test_redis_70_wrong_version_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Not a server: a stand-in that only answers --version, to exercise the version check.
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'Redis server v=6.2.14 sha=0 malloc=jemalloc bits=64'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    _empty_path(monkeypatch, tmp_path)
    with pytest.raises(ServerUnavailable, match=r"6\.2\.14, not 7\.0\.x"):
        locate("redis-7.0")


def test_locate_finds_wheel_binaries_via_importlib() -> None:
    for kind, (module, _, _) in servers.catalog._WHEEL_BINARIES.items():
        try:
            path = locate(kind)
        except ServerUnavailable as exc:
            pytest.skip(exc.reason)
        assert module in path.parts
        assert os.access(path, os.X_OK)
