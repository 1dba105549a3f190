"""Producer processes of the ``latency`` scenario (spawned; one sync ``Queue`` connection each).

Not a scenario: ``bench.scenarios.ORDER`` does not list it.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def send_rate(queue: Any, jobs: int) -> tuple[float, list[str]]:
    """One producer's send rate (jobs/s) over ``jobs`` unmeasured jobs; (rate, ids)."""
    ids = []
    start = time.perf_counter()
    for _ in range(jobs):
        ids.append(queue.enqueue("probe", {"t": time.monotonic(), "m": False}).id)
    return jobs / (time.perf_counter() - start), ids


class Producer:
    """Sends jobs stamped with their intended send time; watches the shared handler count."""

    def __init__(self, queue: Any, count: Any, handled: Any) -> None:
        self.queue, self.count, self.handled = queue, count, handled
        self.ids: list[str] = []

    def send(self, intended: float, measured: bool) -> None:
        """Enqueue one job stamped with its intended send time."""
        self.ids.append(self.queue.enqueue("probe", {"t": intended, "m": measured}).id)

    def warm_up(self, timeout: float = 60.0) -> None:
        """Connect, check the server, and see one handler call after the send."""
        base = self.count.value
        self.send(time.monotonic(), False)
        deadline = time.monotonic() + timeout
        while self.count.value <= base:
            if time.monotonic() > deadline:
                raise TimeoutError("the warm-up job did not reach a handler")
            time.sleep(0.0005)

    def unloaded(self, jobs: int) -> dict[str, float]:
        """One job in flight at a time."""
        for _ in range(jobs):
            self.handled.clear()
            self.send(time.monotonic(), True)
            if not self.handled.wait(10):
                raise TimeoutError("a job did not reach its handler within 10 s")
        return {}

    def open_loop(self, plan: dict[str, Any], index: int, t0: float) -> dict[str, float]:
        """Send jobs index, index + P, ... of a schedule at ``rate`` for ``duration_s``."""
        rate, step = plan["rate"], plan["producers"]
        end = t0 + plan["duration_s"]
        sent, k = 0, index
        while (intended := t0 + k / rate) < end:
            delay = intended - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.send(intended, True)
            sent, k = sent + 1, k + step
        return {"sent": sent, "seconds": time.monotonic() - t0}


def producer_main(target: dict[str, Any], name: str, plan: dict[str, Any], index: int,
                  shared: tuple[Any, Any, Any, Any, Any]) -> None:
    """Producer process: warm up, report ready, wait for the common start, send, report.

    ``shared`` is (handler call counter, handled event, ready event, start time, result pipe).
    """
    count, handled, ready, start_at, conn = shared
    if target["parser"] == "python":
        sys.modules["hiredis"] = None  # type: ignore[assignment]
    from conveyor import Queue  # noqa: PLC0415 (after choosing the parser)

    from bench.scenarios._common import Target  # noqa: PLC0415 (deliberately lazy)

    queue = Queue.from_url(target["url"], name, **Target.from_dict(target).settings())
    producer = Producer(queue, count, handled)
    try:
        producer.warm_up()
        ready.set()
        while not start_at.value:
            time.sleep(0.001)
        t0 = start_at.value
        time.sleep(max(t0 - time.monotonic(), 0))
        loaded = "rate" in plan
        report = producer.open_loop(plan, index, t0) if loaded else producer.unloaded(plan["jobs"])
        conn.send((producer.ids, report, None))
    except Exception as exc:
        conn.send((producer.ids, {}, f"{type(exc).__name__}: {exc}"))
    finally:
        queue.close()
