"""The shared wait's state (no server): which markers a wait covers, and what a reply means."""

from __future__ import annotations

import threading
import time

from conveyor._waiter import NOTHING, SEND, SIGNAL, MarkerWaiter, WaitSet, wait_groups


def _set(wanting: dict[str, bool], woken: list[str]) -> WaitSet:
    ws = WaitSet("wake", 2.0)
    for marker in wanting:
        ws.add(marker, lambda m=marker: wanting[m], lambda m=marker: woken.append(m))
    assert ws.next_keys() == []  # a queue is in the waits from its worker's first ask on
    for marker in wanting:
        assert ws.ask(marker) == SIGNAL
    return ws


def test_a_queue_added_during_a_wait_is_taken_in_by_its_first_ask():
    ws = _set({"a": True}, [])
    assert ws.next_keys() == ["a", "wake"]
    ws.add("b", lambda: True, lambda: None)
    assert ws.ask("b") == SEND and ws.next_keys()[:2] in (["a", "b"], ["b", "a"])


def test_every_queue_comes_first_in_turn():
    ws = _set({"a": True, "b": True, "c": True}, [])
    firsts = [ws.next_keys()[0] for _ in range(3)]
    assert sorted(firsts) == ["a", "b", "c"]
    assert all(ws.next_keys()[-1] == "wake" for _ in range(3))


def test_a_popped_marker_wakes_its_worker_or_is_passed_on():
    wanting, woken = {"a": True, "b": False}, []
    ws = _set(wanting, woken)
    ws.next_keys()
    assert ws.ended((b"a", b"0", 0.0)) is None and woken == ["a"]
    ws.next_keys()
    assert ws.ended((b"b", b"0", 0.0)) == "b" and woken == ["a"]  # full: pass it on, leave b out
    assert "b" not in ws.next_keys()
    assert ws.ended(None) is None and ws.ended((b"wake", b"0", 0.0)) is None


def test_a_left_out_queue_asks_back_in():
    wanting = {"a": True, "b": False}
    ws = _set(wanting, [])
    assert ws.ask("a") == NOTHING  # never left out: already in every wait
    ws.next_keys()
    ws.ended((b"b", b"0", 0.0))
    wanting["b"] = True
    ws.next_keys()  # a wait over a only is in progress
    assert ws.ask("b") == SEND and "b" in ws.next_keys()
    ws.ended((b"b", b"0", 0.0))
    wanting["b"] = False
    ws.ended((b"b", b"0", 0.0))
    assert ws.ask("b") == SIGNAL  # no wait in progress: the next one takes b


def test_a_queue_no_longer_served_passes_its_wake_ups_on():
    ws = _set({"a": True}, [])
    ws.next_keys()
    ws.remove("a")
    assert ws.ended((b"a", b"0", 0.0)) == "a" and ws.next_keys() == []


def test_one_group_on_one_server():
    assert wait_groups(object(), ["m1", "m2", "m3"]) == [[0, 1, 2]]
    assert wait_groups(object(), []) == []


class _Client:
    def close(self) -> None:
        pass


def test_workers_starting_together_start_one_wait_thread(monkeypatch):
    """The Runner's workers call watch() from their own threads at once: one wait thread (a second
    one would block on the same one-connection pool)."""
    created = []
    real_init = threading.Thread.__init__

    def slow_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if kwargs.get("name") == "conveyor-waiter":
            created.append(self)
            time.sleep(0.05)  # widen the window between the check and the assignment

    monkeypatch.setattr(threading.Thread, "__init__", slow_init)
    waiter = MarkerWaiter(_Client(), WaitSet("wake", 0.1))
    callers = [threading.Thread(target=waiter.watch, args=(f"m{i}", lambda: True, lambda: None))
               for i in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    waiter.close()
    assert len(created) == 1


class _ReopeningClient:
    """A blocking pop ends when the client is closed while it waits (a socket closed under a
    blocked BZPOPMIN); a pop that starts just after a close reopens a connection, as redis-py's
    pool does, and blocks for its whole timeout unless the client is closed again."""

    def __init__(self) -> None:
        self.closes = 0
        self.changed = threading.Condition()
        self.closed_once = threading.Event()
        self.called = threading.Event()

    def close(self) -> None:
        with self.changed:
            self.closes += 1
            self.changed.notify_all()
        self.closed_once.set()

    def bzpopmin(self, keys, timeout):
        self.called.set()
        self.closed_once.wait(5)  # the race: this wait begins just after close()
        with self.changed:
            seen = self.closes
            self.changed.wait_for(lambda: self.closes > seen, timeout)
        raise ConnectionError("connection closed")


def test_close_ends_a_wait_that_began_just_after_the_first_close():
    """A worker stopped right after it started: its wait thread reached BZPOPMIN only after
    close() had closed the client, on a reopened connection. close() used to wait JOIN_TIMEOUT
    (2 s) for it before closing again, and a stop under CI load took over 3 s."""
    client = _ReopeningClient()
    waiter = MarkerWaiter(client, WaitSet("wake", 5.0))
    waiter.watch("m", lambda: True, lambda: None)
    waiter.ask("m")  # the worker's first idle moment: the thread starts its wait
    assert client.called.wait(5)
    started = time.monotonic()
    waiter.close()
    assert time.monotonic() - started < 0.5
    assert waiter._thread is not None and not waiter._thread.is_alive()
