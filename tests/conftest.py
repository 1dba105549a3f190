"""Shared fixtures: real servers, one per kind per session, started only when a test asks.

`server` is parametrized over every kind in the catalog, so a test that takes `server` (or
`redis_url`) runs once on each server this machine can start; the others are skipped with the
launcher's reason, which `-ra` prints in the summary. Choose kinds with `--servers a,b` or the
environment variable CONVEYOR_TEST_SERVERS.

Fixtures are synchronous, so they work unchanged in pytest-asyncio tests (asyncio_mode=auto in
pyproject) and in anyio-marked tests (`anyio_backend` below pins asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
import re
import threading
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from bench.servers import KINDS, RunningServer, ServerUnavailable, start_server

KIND_IDS = [k.id for k in KINDS]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--servers",
        default=os.environ.get("CONVEYOR_TEST_SERVERS", ""),
        help="comma-separated server kinds to test on (default: all available): "
        + ",".join(KIND_IDS),
    )
    parser.addoption(
        "--drivers",
        default=os.environ.get("CONVEYOR_TEST_DRIVERS", "redis-py"),
        help="comma-separated client drivers the integration tests run with: redis-py (default), glide",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests taking `driver` run once per driver chosen with --drivers / CONVEYOR_TEST_DRIVERS."""
    if "driver" in metafunc.fixturenames:
        raw = str(metafunc.config.getoption("--drivers") or "redis-py")
        drivers = [d.strip() for d in raw.split(",") if d.strip()]
        metafunc.parametrize("driver", drivers, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`), keep each server kind's tests, per driver and
    quarter of the test modules, on one worker.

    Every xdist worker is its own process with its own server pool: a worker starts the servers
    of the kinds its groups test, and a group's tests run one at a time on that worker's server
    (never two tests on one server at once, as without xdist). Four parts per kind and driver,
    split by module name (at most ~170 s each), let six workers share out the suite evenly (one
    group per kind, ~400 s each, held it back) and a run of one server with both drivers (CI's
    newest Python) spread over all of them. Tests without a server spread freely. The chaos
    tests form one group.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("server") if callspec is not None else None
        if item.path.parent.name == "chaos":
            # Chaos runs (4 worker processes, a proxy and faults each) one at a time, as without
            # xdist: a precaution after one CI run in which an asyncio worker's loop did not run for
            # ~13 s while two ran at once (a lease expired under a running job). Two or three at once
            # here (load 4-7 on 2 cores) stalled no worker loop for even 0.4 s, so the cause is open;
            # the stall watch (chaos/_stallwatch.py) names it if it happens again.
            item.add_marker(pytest.mark.xdist_group("chaos"))
        elif kind is not None:
            driver = callspec.params.get("driver", "redis-py")
            part = zlib.crc32(item.path.name.encode()) % 4  # stable across runs and workers
            item.add_marker(pytest.mark.xdist_group(f"{kind}-{driver}-{part}"))


class _ServerPool:
    """Starts each kind at most once per session, remembers why a kind could not start."""

    def __init__(self, selected: set[str] | None) -> None:
        self._stack = contextlib.ExitStack()
        self._servers: dict[str, RunningServer] = {}
        self._unavailable: dict[str, str] = {}
        self._selected = selected

    def get(self, kind: str) -> RunningServer:
        if self._selected is not None and kind not in self._selected:
            pytest.skip(f"{kind}: not selected (--servers / CONVEYOR_TEST_SERVERS)")
        if kind in self._unavailable:
            pytest.skip(self._unavailable[kind])
        srv = self._servers.get(kind)
        if srv is None:
            try:
                srv = self._stack.enter_context(start_server(kind))
            except ServerUnavailable as exc:
                self._unavailable[kind] = exc.reason
                pytest.skip(exc.reason)
            self._servers[kind] = srv
        if not srv.running:  # a test killed it: bring it back on the same port
            srv.restart()
        return srv

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="session")
def server_pool(request: pytest.FixtureRequest) -> Iterator[_ServerPool]:
    """Session-wide owner of the servers; stops them all at the end, even after failures."""
    raw = str(request.config.getoption("--servers") or "").strip()
    selected = {s.strip() for s in raw.split(",") if s.strip()} or None
    pool = _ServerPool(selected)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session", params=[pytest.param(k, id=k) for k in KIND_IDS])
def server(request: pytest.FixtureRequest, server_pool: _ServerPool) -> RunningServer:
    """A running server of each kind in turn (default config; Dragonfly in hashtag mode)."""
    return server_pool.get(str(request.param))


@pytest.fixture(scope="session")
def redis_url(server: RunningServer) -> str:
    """URL of the `server` fixture's server (db 0, no credentials)."""
    return server.url


@pytest.fixture(scope="session", autouse=True)
def glide_reply_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """With `--drivers glide`: a loop running all session long reads glide's asyncio replies.

    valkey-glide (asyncio) reads every reply of the process on the loop of the first glide client
    created, until that loop is closed (valkey-io/valkey-glide#7122, see `idle_reply_loop` in
    _glide_async.py). Here that would be pytest-asyncio's session loop, idle during sync tests, so the
    asyncio Runner's loop in a thread (test_shared_wait) got no reply once an async glide test had
    run first. A process with one loop at a time, as `conveyor worker`, does not need this.
    """
    glide = _import_glide() if "glide" in str(request.config.getoption("--drivers")) else None
    if glide is None:
        yield
        return
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="glide-replies", daemon=True)
    thread.start()
    config = glide.GlideClientConfiguration([glide.NodeAddress("127.0.0.1", 1)], lazy_connect=True)
    first = asyncio.run_coroutine_threadsafe(glide.GlideClient.create(config), loop).result(30)
    asyncio.run_coroutine_threadsafe(first.close(), loop).result(30)  # the reader stays on `loop`
    try:
        yield
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _import_glide() -> Any:
    """The optional valkey-glide (asyncio) module, or None."""
    try:
        return importlib.import_module("glide")
    except ImportError:
        return None


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """anyio-marked tests run on asyncio, like the rest of the suite."""
    return "asyncio"


_counter = itertools.count()
_RUN = uuid.uuid4().hex[:6]


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name unique to this test (and run), so tests never need to flush the server.

    Built from the test name plus a counter; only [A-Za-z0-9_.:-], so never `{` or `}`.
    """
    base = re.sub(r"[^A-Za-z0-9_.:-]+", "-", request.node.name).strip("-")[:60]
    return f"t-{base}-{_RUN}-{next(_counter)}"
