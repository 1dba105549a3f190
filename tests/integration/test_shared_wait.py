"""A worker process over several queues waits on all their markers with one blocking connection.

Each body runs with thread workers (sync tasks) and asyncio workers (async tasks), through the
Runner that `conveyor worker -q a,b,c` uses. The idle wait is 30 s long, so a job picked up within
the tests' deadlines was woken by the shared wait, never by a timeout.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
import redis
from _support import client_command as _command
from conveyor import Conveyor
from conveyor._runner import Runner

BLOCK = 30.0  # longer than every deadline below: only a wake-up can explain a prompt pickup
PROMPT = 10.0  # generous on a loaded machine, still a third of the block


class Served:
    """An app over three queues, its Runner in a thread, and what its handlers saw."""

    def __init__(self, url: str, name: str, mode: str, driver: str) -> None:
        self.names = [f"{name}-{suffix}" for suffix in "abc"]
        self.app = Conveyor(url, maintenance_interval=0.2, driver=driver)
        self.done: list[tuple[str, int]] = []
        self.gate = threading.Event()  # holds `hold` jobs until set
        self.admin = redis.Redis.from_url(url, decode_responses=True)
        for queue in self.names:
            self._register(queue, mode)
        self.runner = Runner(self.app, self.names, concurrency=1, block_timeout=BLOCK)
        self.stats: dict = {}
        self.thread = threading.Thread(target=lambda: self.stats.update(self.runner.run()), daemon=True)

    def _register(self, queue: str, mode: str) -> None:
        done, gate = self.done, self.gate
        if mode == "sync":
            def run(n: int) -> None:
                done.append((queue, n))

            def hold() -> None:
                gate.wait(PROMPT)
        else:
            async def run(n: int) -> None:  # type: ignore[misc]
                done.append((queue, n))

            async def hold() -> None:  # type: ignore[misc]
                while not gate.is_set():
                    await asyncio.sleep(0.01)
        self.app.task(queue=queue, name=f"run-{queue[-1]}")(run)
        self.app.task(queue=queue, name=f"hold-{queue[-1]}")(hold)

    def roles(self) -> tuple[Counter[tuple[str, str]], list[str]]:
        """(queue suffix, role) of every connection named after the three queues, and the
        commands of the waiters."""
        found: Counter[tuple[str, str]] = Counter()
        waiting: list[str] = []
        for client in self.admin.client_list():
            queue, _, role = client.get("name", "").removeprefix("conveyor:").rpartition(":")
            if queue in self.names:
                found[(queue[-1], role)] += 1
                if role == "waiter":
                    waiting.append(_command(client))
        return found, waiting

    def enqueue(self, queue: str, task: str, *args: object) -> None:
        self.app.enqueue(f"{task}-{queue[-1]}", *args)

    def close(self) -> None:
        self.runner.stop()
        self.thread.join(10)
        self.app.close()
        self.admin.close()


def _until(predicate, what: str, timeout: float = PROMPT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(params=["sync", "async"])
def served(request, redis_url, queue_name, driver):
    s = Served(redis_url, queue_name, request.param, driver)
    s.thread.start()
    yield s
    s.close()


def _idle(s: Served) -> bool:
    found, waiting = s.roles()
    return found[("a", "waiter")] == 1 and waiting == ["bzpopmin"]


def test_one_waiter_for_three_queues_wakes_each_queue_and_stops_at_once(served):
    s = served
    expected = {(q, role): 1 for q in "abc" for role in ("pump", "maint")} | {("a", "waiter"): 1}
    _until(lambda: dict(s.roles()[0]) == expected, "a pump and a maint per queue, one waiter")
    _until(lambda: _idle(s), "the shared waiter to block")
    for n, queue in enumerate(reversed(s.names)):  # the last queue of the wait's list too
        s.enqueue(queue, "run", n)
        _until(lambda n=n: len(s.done) == n + 1, f"the job on {queue} to run")
    assert s.done == [(q, n) for n, q in enumerate(reversed(s.names))]
    t0 = time.monotonic()
    s.runner.stop()
    s.thread.join(BLOCK)
    assert not s.thread.is_alive() and time.monotonic() - t0 < PROMPT / 2, "stop waited for the block"
    assert s.stats == {q: {"processed": 1, "failed": 0, "held": 0} for q in s.names}
    _until(lambda: not s.roles()[0], "every worker connection closed")


def test_a_queue_left_out_while_busy_is_woken_again(served):
    """Queue a (one slot) is busy when its next job arrives: the wait passes that wake-up on and
    leaves a out. Once idle, a is taken back into the wait in progress (wake key), so a job
    enqueued then is picked up without waiting for the 30 s block to end."""
    s = served
    a = s.names[0]
    _until(lambda: _idle(s), "the shared waiter to block")
    s.enqueue(a, "hold")
    _until(lambda: s.app.queue(a).counts()["active"] == 1, "the holding job to start")
    s.enqueue(a, "run", 1)  # a is full: this wake-up is passed on and a left out
    _until(lambda: _idle(s), "the wait to block again without a")
    s.gate.set()
    _until(lambda: s.done == [(a, 1)], "the queued job to follow the holding one")
    _until(lambda: _idle(s), "the wait to block again")
    s.enqueue(a, "run", 2)
    _until(lambda: s.done == [(a, 1), (a, 2)], "a job on the re-admitted queue")


def _waits(s: Served) -> int:
    return int(s.admin.info("commandstats").get("cmdstat_bzpopmin", {}).get("calls", 0))


def test_a_backlog_on_a_busy_queue_neither_spins_the_wait_nor_delays_another(served):
    """The fairness rule: queue a (one slot, held) has a backlog, so its marker stays set; the wait
    leaves a out instead of returning at once again and again, and a job on b runs at once."""
    s = served
    a, b = s.names[:2]
    _until(lambda: _idle(s), "the shared waiter to block")
    s.enqueue(a, "hold")
    _until(lambda: s.app.queue(a).counts()["active"] == 1, "the holding job to start")
    for n in range(20):
        s.enqueue(a, "run", n)
    _until(lambda: _idle(s), "the wait to block again without a")
    before = _waits(s)
    time.sleep(0.5)
    assert _waits(s) - before <= 2, "the wait spun on the busy queue's marker"
    s.enqueue(b, "run", 99)
    _until(lambda: (b, 99) in s.done, "the job on b behind a's backlog")
    s.gate.set()
    _until(lambda: len(s.done) == 21, "a's backlog")
