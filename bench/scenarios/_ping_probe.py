"""Another client's view of the server while a scenario works: a child process sending PING
one at a time, whose latencies show how long the server kept it waiting (used by the
``maintenance`` and ``listing`` scenarios)."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

from bench.scenarios._common import Target


def _probe(url: str, protocol: int, ready: Any, stop: Any, conn: Any) -> None:
    """Child process: PING one at a time until ``stop``, at least once; send the latencies back.

    ``ready`` is set after the first timed PING, not before: a scenario whose work is over in a
    few milliseconds (a listing with nothing parked) could otherwise stop the probe before its
    first sample, and a summary of no samples fails the whole cell."""
    import redis  # noqa: PLC0415 (deliberately lazy)

    client = redis.Redis.from_url(url, protocol=protocol)
    client.ping()  # connects: not a sample
    samples: list[float] = []
    while not samples or not stop.is_set():
        t0 = time.perf_counter()
        client.ping()
        samples.append(time.perf_counter() - t0)
        if len(samples) == 1:
            ready.set()
        time.sleep(0.0005)
    conn.send(samples)
    client.close()


class PingProbe:
    """A child process sending PING one at a time from ``start()`` to ``stop()`` (its latencies):
    what the server's work meanwhile costs every other client."""

    def __init__(self, target: Target) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ready, self._stop = ctx.Event(), ctx.Event()
        self._recv, send = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_probe, args=(target.url, target.protocol, self._ready,
                                                         self._stop, send))  # fmt: skip

    def start(self) -> None:
        """Start the child; return once it has timed one PING (or after 30 s)."""
        self._process.start()
        self._ready.wait(30)

    def stop(self) -> list[float]:
        self._stop.set()
        samples: list[float] = self._recv.recv()
        self._process.join(10)
        return samples
