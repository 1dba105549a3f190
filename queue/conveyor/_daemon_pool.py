"""A thread pool whose threads never hold up the process exit: the asyncio runner's executor.

An asyncio worker runs an app's sync tasks in threads (``asyncio.to_thread``). A thread still
running at the shutdown deadline, a time limit or a cancel cannot be interrupted; its job was
already settled or released, so the process must be free to exit. The stock
``ThreadPoolExecutor`` forbids that twice: ``asyncio.run`` joins the default executor's threads
before it returns, and the interpreter joins every such thread at exit. This pool's threads are
daemon threads and its ``shutdown`` never waits for a call still running.

It has no cap on threads: the worker's slots bound the calls its handlers wait for, but a slot
is freed while a thread past its time limit runs on, and the next job must not wait behind it
(with one thread per slot it did: its own limit passed in the queue, and it was failed as if its
thread ran). An idle thread is reused before a new one starts.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(ThreadPoolExecutor):
    """Daemon threads, one started whenever work arrives and no thread is idle.

    A ``ThreadPoolExecutor`` only because ``loop.set_default_executor`` accepts nothing else:
    ``submit`` and ``shutdown`` are its own, so none of the stock pool's threads ever start.
    """

    def __init__(self, thread_name_prefix: str) -> None:
        super().__init__(1, thread_name_prefix)  # the stock pool's state, never used
        self._prefix = thread_name_prefix
        self._pending: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._free = threading.Semaphore(0)
        self._guard = threading.Lock()
        self._daemons: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._guard:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._pending.put((future, fn, args, kwargs))
            if not self._free.acquire(blocking=False):
                name = f"{self._prefix}_{len(self._daemons)}"
                thread = threading.Thread(target=self._serve, name=name, daemon=True)
                thread.start()
                self._daemons.append(thread)
        return future

    def _serve(self) -> None:
        while (work := self._pending.get()) is not None:
            future, fn, args, kwargs = work
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # handed to the awaiting caller, as the stdlib pool does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del work, future  # drop the references while idle
            self._free.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end, a running call runs on (``wait`` joins only the
        threads that are idle, never one still inside a call)."""
        with self._guard:
            self._closed = True
            if cancel_futures:
                self._cancel_queued()
            for _ in self._daemons:
                self._pending.put(None)
        del wait  # never wait for a running call: that is this pool's reason to exist

    def _cancel_queued(self) -> None:
        while True:
            try:
                work = self._pending.get_nowait()
            except queue.Empty:
                return
            if work is not None:
                work[0].cancel()
