"""Start, stop and restart a server this process owns (mirakuru, a free loopback port,
readiness proven by PING), with retries on a busy port."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import redis
from mirakuru import Executor
from mirakuru.exceptions import AlreadyRunning, ProcessExitedWithError, TimeoutExpired
from redis.backoff import NoBackoff
from redis.retry import Retry

from bench.servers.catalog import CONFIGS, HOST, ServerKind, ServerStartError, get_kind, locate
from bench.servers.flags import _check_choice, build_flags

START_TIMEOUT = 30.0


_PR_SET_PDEATHSIG = 1  # prctl(2), Linux


def _session_ending_with(parent: int) -> Callable[[], None] | None:
    """A child's pre-exec step: its own session (as mirakuru's), and on Linux SIGTERM once
    ``parent``'s starting thread ends, so a server outlives no process that dies without its
    atexit hooks (SIGKILL, os._exit). Only from the main thread: the signal comes when the thread
    that started the child ends, which for a worker thread can be long before the process."""
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def preexec() -> None:
        os.setsid()
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request: nobody owns this server
            os._exit(1)

    return preexec


class _PingExecutor(Executor):
    """mirakuru executor whose readiness check is a real PING (LOADING counts as not ready), and
    whose server ends with the process that started it (see :func:`_session_ending_with`)."""

    def __init__(self, argv: list[str], host: str, port: int, **kwargs: Any) -> None:
        super().__init__(argv, **kwargs)
        self.host = host
        self.port = port

    @property
    def _popen_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = super()._popen_kwargs
        preexec = _session_ending_with(os.getpid())
        if preexec is not None and kwargs.get("preexec_fn") is os.setsid:
            kwargs["preexec_fn"] = preexec
        return kwargs

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
