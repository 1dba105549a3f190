"""Helpers shared by the integration tests: one test body drives both the sync and async surfaces.

The `api` fixture (imported by each test module) is parametrized over "sync" and "async". Its
queues expose every Queue/AsyncQueue method as an awaitable: sync calls run in a worker thread
through `asyncio.to_thread`, async calls are awaited directly. Workers are started in a dedicated
thread (sync `Worker.run`) or as a task on the test's loop (`AsyncWorker.run`), and handlers are
built for the right surface by `api.handler(...)`, so a test body is written once.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import signal
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from conveyor import AsyncQueue, AsyncWorker, Job, Queue, Worker

from bench.servers import RunningServer

SURFACES = ["sync", "async"]


def fork_child(body: Callable[[], str], timeout: float) -> Callable[[], str]:
    """Run ``body`` in a forked child; the parent gets a function that waits for the child and
    returns what ``body`` returned ('hung' past ``timeout`` seconds, or the repr of its error)."""
    reader, writer = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a process with threads
        pid = os.fork()
    if pid == 0:
        outcome = "hung"
        try:
            signal.signal(signal.SIGALRM, lambda *_: os._exit(os.write(writer, b"hung") and 1))
            signal.alarm(int(timeout))
            outcome = body()
        except BaseException as exc:
            outcome = repr(exc)
        finally:
            os.write(writer, outcome.encode())
            os._exit(0)
    os.close(writer)

    def outcome() -> str:
        os.waitpid(pid, 0)
        with os.fdopen(reader, "rb") as child:
            return child.read().decode()

    return outcome


def run_in_thread(run: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException | None]]:
    """``run`` started in a daemon thread; the list gets None when it returns, or what it raised."""
    outcome: list[BaseException | None] = []

    def body() -> None:
        try:
            run()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


class QueueAdapter:
    """A Queue or AsyncQueue whose methods are all awaitable."""

    def __init__(self, surface: str, inner: Queue | AsyncQueue) -> None:
        self.surface = surface
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def keys(self) -> Any:
        return self.inner.core.keys

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        target = getattr(self.inner, method)
        if self.surface == "async":
            return target  # type: ignore[no-any-return]

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(target, *args, **kwargs)

        return call

    async def raw(self, command: str, *args: Any, **kwargs: Any) -> Any:
        """A redis-py command on the queue's own client (and pool)."""
        target = getattr(self.inner.client, command)
        if self.surface == "async":
            return await target(*args, **kwargs)
        return await asyncio.to_thread(target, *args, **kwargs)

    async def close(self) -> None:
        if isinstance(self.inner, AsyncQueue):
            await self.inner.aclose()
        else:
            await asyncio.to_thread(self.inner.close)


class WorkerHandle:
    """A running Worker (own thread) or AsyncWorker (task on the test's loop)."""

    def __init__(self, surface: str, worker: Worker | AsyncWorker) -> None:
        self.surface = surface
        self.worker = worker
        self.result: dict[str, int] | None = None
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[Any] | None = None
        self.wake: Callable[[], Any] | None = None

    def start(self) -> WorkerHandle:
        if isinstance(self.worker, AsyncWorker):
            self._task = asyncio.create_task(self.worker.run())
        else:
            self._thread = threading.Thread(target=self._run_sync, daemon=True, name="test-worker")
            self._thread.start()
        return self

    def _run_sync(self) -> None:
        assert isinstance(self.worker, Worker)
        try:
            self.result = self.worker.run()
        except BaseException as exc:  # reported by join()
            self.error = exc

    @property
    def running(self) -> bool:
        if self._task is not None:
            return not self._task.done()
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Worker.stop(); a sync worker blocked in BZPOPMIN only notices at the end of its block
        (block_timeout), so the test also drops a wake-up member on the marker to save time."""
        self.worker.stop()
        if self._thread is not None and self.wake is not None:
            self.wake()

    async def join(self, timeout: float) -> dict[str, int] | None:
        """Wait for run() to return; raise what it raised; fail if it is still running."""
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=timeout)
            if not done:
                raise AssertionError(f"worker still running after {timeout} s: {self.state()}")
            self.result = self._task.result()
        elif self._thread is not None:
            await asyncio.to_thread(self._thread.join, timeout)
            if self._thread.is_alive():
                raise AssertionError(f"worker still running after {timeout} s: {self.state()}")
            if self.error is not None:
                raise self.error
        return self.result

    async def force_cancel(self) -> None:
        """Last resort at teardown for a worker that did not stop: cancel its task repeatedly, so a
        failed test does not leave it running (and burning CPU) for the rest of the session."""
        for _ in range(20):
            if self._task is None or self._task.done():
                return
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=0.25)
        for task in asyncio.all_tasks():  # its own child tasks (maintenance, slots)
            if getattr(task.get_coro(), "__qualname__", "").startswith("AsyncWorker."):
                task.cancel()

    def state(self) -> str:
        """The worker's book-keeping, for failure messages."""
        d = self.worker._dispatch
        return (f"stopping={d.stopping} leases={sorted(d.leases)} done={[j.id for j in d.done]} "
                f"failures={[f.job.id for f in d.failures]} stats={d.stats()}")

    def check_alive(self) -> None:
        """Fail with the worker's own exception if it died."""
        if self._task is not None and self._task.done():
            exc = self._task.exception()
            raise AssertionError(f"worker exited early: {exc!r}") from exc
        if self._thread is not None and not self._thread.is_alive():
            raise AssertionError(f"worker exited early: {self.error!r}") from self.error


class Api:
    """Everything a test body needs, for one surface, one server and one queue name."""

    def __init__(self, surface: str, server: RunningServer, name: str, driver: str = "redis-py") -> None:
        self.surface = surface
        self.driver = driver
        self.server = server
        self.name = name
        self.admin: redis.Redis = server.client()
        self._queues: list[QueueAdapter] = []
        self._workers: list[WorkerHandle] = []

    @property
    def is_async(self) -> bool:
        return self.surface == "async"

    def queue(self, name: str | None = None, url: str | None = None, **settings: Any) -> QueueAdapter:
        """A queue with its own bounded pool (from_url), closed at teardown."""
        cls = AsyncQueue if self.is_async else Queue
        settings.setdefault("driver", self.driver)
        inner = cls.from_url(url or self.server.url, self.name if name is None else name, **settings)
        adapter = QueueAdapter(self.surface, inner)
        self._queues.append(adapter)
        return adapter

    def handler(
        self,
        fn: Callable[[Job], Any] | None = None,
        *,
        sleep: float = 0.0,
        start: Callable[[Job], Any] | None = None,
    ) -> Callable[[Job], Any]:
        """A handler of this surface: call start(job), sleep, then return fn(job) (which may raise)."""
        if self.is_async:

            async def async_handler(job: Job) -> Any:
                if start is not None:
                    start(job)
                if sleep:
                    await asyncio.sleep(sleep)
                return fn(job) if fn is not None else None

            return async_handler

        def sync_handler(job: Job) -> Any:
            if start is not None:
                start(job)
            if sleep:
                time.sleep(sleep)
            return fn(job) if fn is not None else None

        return sync_handler

    def worker(self, queue: QueueAdapter, handlers: dict[str, Any], **options: Any) -> WorkerHandle:
        """A started worker on ``queue``; stopped at teardown if the test did not stop it."""
        options.setdefault("install_signal_handlers", False)
        cls = AsyncWorker if self.is_async else Worker
        handle = WorkerHandle(self.surface, cls(queue.inner, handlers, **options))
        member = f"test-stop-{len(self._workers)}"
        handle.wake = lambda: self.admin.zadd(queue.keys.marker, {member: 0})
        handle.start()
        self._workers.append(handle)
        return handle

    def stop_workers(self, handles: list[WorkerHandle] | None = None) -> None:
        """Stop several workers: every stop() first, then the wake-ups (a wake-up taken by a worker
        that was not stopped yet would be lost to the others)."""
        handles = self._workers if handles is None else handles
        for handle in handles:
            handle.worker.stop()
        for handle in handles:
            handle.stop()

    async def cleanup(self) -> None:
        self.stop_workers()
        for handle in self._workers:
            try:
                await handle.join(5)
            except BaseException:
                await handle.force_cancel()
        for q in self._queues:
            with contextlib.suppress(Exception):
                await q.close()
        self.admin.close()

    # -- inspection through a separate admin connection -----------------------------------------
    def all_keys(self) -> set[bytes]:
        """Every key on the server. To prove nothing was written, compare with ``<=`` (no key
        added), not with DBSIZE: a key an earlier test left with a TTL may expire meanwhile."""
        return set(self.admin.scan_iter(count=1000))

    def queue_keys(self, name: str | None = None, prefix: str = "cv") -> list[bytes]:
        """Every key of the queue (its hash tag), found with SCAN."""
        pattern = f"{prefix}:{{{name or self.name}}}:*"
        return sorted(self.admin.scan_iter(match=pattern, count=1000))

    def snapshot(self, name: str | None = None, prefix: str = "cv") -> dict[bytes, Any]:
        """Full content of the queue's keys, to prove an operation changed nothing."""
        out: dict[bytes, Any] = {}
        for key in self.queue_keys(name, prefix):
            kind = self.admin.type(key)
            if kind == b"hash":
                out[key] = ("hash", self.admin.hgetall(key))
            elif kind == b"list":
                out[key] = ("list", self.admin.lrange(key, 0, -1))
            elif kind == b"zset":
                out[key] = ("zset", self.admin.zrange(key, 0, -1, withscores=True))
            else:
                out[key] = (kind, None)
        return out

    def config(self, name: str) -> str:
        """A server configuration value, as text."""
        reply = self.admin.config_get(name)
        value = reply.get(name, reply.get(name.encode()))
        return value.decode() if isinstance(value, bytes) else str(value)

    def server_ms(self) -> int:
        sec, usec = self.admin.time()
        return int(sec) * 1000 + int(usec) // 1000


async def wait_until(
    predicate: Callable[[], Awaitable[bool]] | Callable[[], bool],
    timeout: float = 5.0,
    interval: float = 0.02,
    what: str = "condition",
) -> None:
    """Poll ``predicate`` (sync or async) until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def client_command(client: dict) -> str:
    """The current command of a CLIENT LIST entry. Dragonfly's has no cmd= field; a client blocked
    there shows flags=b, read here as "bzpopmin" (the only blocking command Conveyor sends)."""
    if "cmd" in client:
        return client["cmd"]
    return "bzpopmin" if "b" in client.get("flags", "") else ""


def with_token(job: Job, token: str | None) -> Job:
    """A copy of ``job`` presenting another lease token."""
    clone = copy.copy(job)
    clone.token = token
    return clone


EMPTY = {"waiting": 0, "delayed": 0, "active": 0, "completed": 0, "failed": 0,
         "cancelled": 0, "total_completed": 0, "total_failed": 0}


def counts(**nonzero: int) -> dict[str, int]:
    """The expected counts dict: zero everywhere except the given states."""
    return {**EMPTY, **nonzero}


@pytest.fixture(name="api", params=SURFACES)
async def api_fixture(
    request: pytest.FixtureRequest, server: RunningServer, queue_name: str, driver: str
) -> Any:
    """One surface (sync or async) on one server with one driver, for one test's queue name."""
    a = Api(str(request.param), server, queue_name, driver)
    try:
        yield a
    finally:
        await a.cleanup()
