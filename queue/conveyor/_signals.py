"""SIGTERM/SIGINT handlers for the threaded ``Worker`` and the ``Runner``.

A Python signal handler runs in the main thread between any two of its bytecodes: maybe while
that thread holds the plain Lock of a ``threading.Event`` that stopping sets (a worker's wake-up,
the scheduler's stop). A handler that stopped the worker itself then waited for its own thread
for ever. Here the handler only posts the request on a ``SimpleQueue`` (whose put is reentrant),
and a thread of its own calls ``stop()``.
"""

from __future__ import annotations

import contextlib
import queue as stdlib_queue
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None], notice: Callable[[int], None] | None = None) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT call ``notice(signum)`` in the handler (it must take no
    lock but a reentrant one: log, count, exit) and then have ``stop()`` called from a thread.
    Outside the main thread nothing is installed (Python allows handlers only there). The
    handlers replaced are put back on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    requests: stdlib_queue.SimpleQueue[bool] = stdlib_queue.SimpleQueue()

    def relay() -> None:
        while requests.get():
            stop()

    def handler(signum: int, _frame: object) -> None:
        if notice is not None:
            notice(signum)
        requests.put(True)

    threading.Thread(target=relay, name="conveyor-signals", daemon=True).start()
    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, replaced in previous.items():
            signal.signal(sig, replaced)
        requests.put(False)
