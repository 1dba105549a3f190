"""Audit of the producer side and connections: each test failed before its fix."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support import fork_child
from conveyor import ConnectionFailedError, Queue, QueueSettings, ReplicationError

TIMEOUT = 10.0


class Interrupted(KeyboardInterrupt):
    """What Ctrl-C raises in the main thread, sent here by the test itself."""


@pytest.fixture
def interrupt_main() -> Iterator[Callable[..., threading.Thread]]:
    """``interrupt_main(when, then)``: a thread that interrupts the main thread (as Ctrl-C does,
    ending a blocking wait) as soon as ``when()`` is true; the signal handler raises
    ``Interrupted`` once ``then()`` (if given) is true, so the test decides what the program did
    just before the interrupt reached it."""
    then_of: list[Callable[[], bool]] = []

    def raise_interrupt(signum: int, frame: Any) -> None:
        deadline = time.monotonic() + TIMEOUT
        while then_of and not then_of[0]() and time.monotonic() < deadline:
            time.sleep(0.005)
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, raise_interrupt)
    main = threading.get_ident()

    def start(when: Callable[[], bool], then: Callable[[], bool] | None = None) -> threading.Thread:
        then_of[:] = [then] if then else []

        def run() -> None:
            deadline = time.monotonic() + TIMEOUT
            while not when() and time.monotonic() < deadline:
                time.sleep(0.005)
            signal.pthread_kill(main, signal.SIGUSR1)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    yield start
    signal.signal(signal.SIGUSR1, previous)


def held_calls(q: Queue, gates: list[threading.Event]) -> list[int]:
    """Enqueue script call i of the queue waits for ``gates[i]`` (if any) before it is sent (in
    this process only); the list returned records every call's job count."""
    sizes, parent = [], os.getpid()
    send = q._evalsha

    def held(call: Any, *path: Any) -> Any:
        if call.script.name == "enqueue" and os.getpid() == parent:
            sizes.append((len(call.args) - 1) // 5)
            if len(sizes) <= len(gates):
                gates[len(sizes) - 1].wait(TIMEOUT * 3)
        return send(call, *path)

    q._evalsha = held  # type: ignore[method-assign]
    return sizes


def in_thread(q: Queue, n: int, out: dict[int, Any]) -> threading.Thread:
    """A thread enqueueing job ``n``; its job (or error) lands in ``out[n]``."""

    def run() -> None:
        try:
            out[n] = q.enqueue("t", {"n": n})
        except BaseException as exc:
            out[n] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def calls_in_flight(
    q: Queue, out: dict[int, Any], numbers: tuple[int, ...], later: tuple[threading.Event, ...] = ()
) -> tuple[list[int], threading.Event, list[threading.Thread]]:
    """One thread per job of ``numbers``, each one's enqueue held in flight (the batcher's limit is
    two calls) until the event returned is set; the calls after them wait for ``later``."""
    release = threading.Event()
    sizes = held_calls(q, [release] * len(numbers) + list(later))
    threads = [in_thread(q, n, out) for n in numbers]
    while len(sizes) < len(numbers):
        time.sleep(0.005)
    return sizes, release, threads


def stored_payloads(q: Queue) -> list[int]:
    return sorted(job.payload["n"] for job in q.jobs("waiting", 0, 1000))


def test_a_caller_interrupted_while_its_job_waits_leaves_the_batch_and_the_others_served(
    redis_url: str, queue_name: str, interrupt_main: Any
) -> None:
    """Ctrl-C in a thread waiting to join a batch: its job is not sent, and the caller behind it
    still gets its job. Before, the interrupted caller stayed in the batch as the one to send it:
    nobody sent it, the caller behind it waited for ever, and so did every later enqueue."""
    q = Queue.from_url(redis_url, queue_name, batch_enqueue=True)
    out: dict[int, Any] = {}
    _, release, first = calls_in_flight(q, out, (1, 2))
    interrupt_main(lambda: len(q._batcher._pending) == 1)
    with pytest.raises(Interrupted):
        q.enqueue("t", {"n": 0})
    waiting = len(q._batcher._pending)
    behind = in_thread(q, 3, out)
    while len(q._batcher._pending) == waiting:
        time.sleep(0.005)
    release.set()
    for thread in [*first, behind]:
        thread.join(TIMEOUT)
    assert not behind.is_alive(), "the caller behind the interrupted one never got its job"
    assert {n: job.payload["n"] for n, job in out.items()} == {1: 1, 2: 2, 3: 3}
    assert q.enqueue("t", {"n": 4}).created  # the batcher is not stuck
    assert stored_payloads(q) == [1, 2, 3, 4]  # the interrupted caller's job was never sent
    q.close()


def test_a_caller_interrupted_just_after_it_was_handed_a_batch_passes_it_on(
    redis_url: str, queue_name: str, interrupt_main: Any
) -> None:
    """Ctrl-C reaching a waiting caller just after it was chosen to send the next batch (its own
    job and the one behind it): the job behind it is still sent. Before, nobody sent that batch:
    its other caller, and every later enqueue, waited for ever."""
    q = Queue.from_url(redis_url, queue_name, batch_enqueue=True)
    out: dict[int, Any] = {}
    _, release, first = calls_in_flight(q, out, (1, 2))
    behind: list[threading.Thread] = []

    def both_wait() -> bool:
        if len(q._batcher._pending) == 1 and not behind:
            behind.append(in_thread(q, 3, out))
        return len(q._batcher._pending) == 2

    def handed() -> bool:  # the calls in flight return: the main thread is handed [0, 3]
        release.set()
        return all(not thread.is_alive() for thread in first) and not q._batcher._pending

    interrupt_main(both_wait, then=handed)
    with pytest.raises(Interrupted):
        q.enqueue("t", {"n": 0})
    behind[0].join(TIMEOUT)
    assert not behind[0].is_alive(), "the batch the interrupted caller was to send was never sent"
    assert {n: job.payload["n"] for n, job in out.items()} == {1: 1, 2: 2, 3: 3}
    assert q.enqueue("t", {"n": 4}).created
    assert stored_payloads(q) == [1, 2, 3, 4]
    q.close()


def test_a_caller_interrupted_as_it_starts_sending_its_batch_passes_it_on(
    redis_url: str, queue_name: str
) -> None:
    """Ctrl-C reaching the caller chosen to send a batch after its wait returned, as the send
    starts (the check on entering ``_send``, before the call; simulated here by raising there):
    the job behind it is still sent. Before, only the wait itself was guarded: nobody sent that
    batch, and its other caller waited for ever."""
    q = Queue.from_url(redis_url, queue_name, batch_enqueue=True)
    out: dict[int, Any] = {}
    _, release, first = calls_in_flight(q, out, (1, 2))
    send, main = q._batcher._send, threading.get_ident()

    def interrupted_first(batch: Any) -> None:
        if threading.get_ident() == main:
            raise Interrupted
        send(batch)

    q._batcher._send = interrupted_first  # type: ignore[method-assign]
    behind: list[threading.Thread] = []

    def both_wait() -> None:
        while len(q._batcher._pending) < 1:
            time.sleep(0.005)
        behind.append(in_thread(q, 3, out))
        while len(q._batcher._pending) < 2:
            time.sleep(0.005)
        release.set()  # the calls in flight return: the main thread is handed [0, 3]

    threading.Thread(target=both_wait, daemon=True).start()
    with pytest.raises(Interrupted):
        q.enqueue("t", {"n": 0})
    for thread in [*first, *behind]:
        thread.join(TIMEOUT)
    assert not behind[0].is_alive(), "the batch the interrupted caller was to send was never sent"
    assert {n: job.payload["n"] for n, job in out.items()} == {1: 1, 2: 2, 3: 3}
    assert q.enqueue("t", {"n": 4}).created
    assert stored_payloads(q) == [1, 2, 3, 4]
    q.close()


def test_an_interrupt_of_the_thread_sending_a_batch_is_not_raised_in_the_other_callers(
    redis_url: str, queue_name: str, interrupt_main: Any
) -> None:
    """Ctrl-C in the thread that sends a batch for several callers: the others get a
    ConnectionFailedError saying the outcome is unknown, not the KeyboardInterrupt of another
    thread (which, raised in a worker thread, ended it as if it had been interrupted itself)."""
    q = Queue.from_url(redis_url, queue_name, batch_enqueue=True)
    never = threading.Event()
    out: dict[int, Any] = {}
    sizes, release, first = calls_in_flight(q, out, (1, 2), (never,))  # 3rd: the main thread's
    behind: list[threading.Thread] = []

    def after_main_waits() -> bool:  # then a caller joins behind the main thread, and both go
        if len(q._batcher._pending) == 1 and not behind:
            behind.append(in_thread(q, 3, out))
        if len(q._batcher._pending) == 2 and not release.is_set():
            release.set()
        return len(sizes) == 3

    interrupt_main(after_main_waits)
    with pytest.raises(Interrupted):
        q.enqueue("t", {"n": 0})
    never.set()
    assert sizes[2] == 2  # the main thread was sending its job and job 3
    for thread in [*first, *behind]:
        thread.join(TIMEOUT)
    assert isinstance(out[3], ConnectionFailedError), repr(out[3])
    assert "may have been applied or not" in str(out[3])
    assert q.enqueue("t", {"n": 4}).created
    q.close()


def test_a_forked_child_does_not_wait_for_its_parents_batch_in_flight(
    redis_url: str, queue_name: str
) -> None:
    """A child forked while parent threads' enqueues are in flight enqueues at once. Before, the
    child's batcher still counted the parent's two calls in flight (its limit): the child's
    enqueue waited for calls no thread of the child would ever finish (a hang)."""
    q = Queue.from_url(redis_url, queue_name, batch_enqueue=True)
    out: dict[int, Any] = {}
    _, release, parent_calls = calls_in_flight(q, out, (1, 3))
    child = fork_child(lambda: "created" if q.enqueue("t", {"n": 2}).created else "not created", TIMEOUT)
    release.set()
    for thread in parent_calls:
        thread.join(TIMEOUT)
    assert child() == "created"
    assert stored_payloads(q) == [1, 2, 3]
    q.close()


def test_a_wait_for_replicas_as_long_as_the_socket_timeout_is_refused(
    redis_url: str, queue_name: str
) -> None:
    """``wait_replicas`` with a ``wait_timeout`` not shorter than ``socket_timeout`` is refused
    when the settings are built. Before, it was accepted, and with a replica lagging every
    enqueue, ack and fail stored its write, then the socket timed out while WAIT still waited:
    a ConnectionFailedError ('may have been applied or not', the connection dropped) instead of
    the ReplicationError that says the write is on the primary."""
    with pytest.raises(ValueError, match=r"wait_timeout \(1.0 s\) must be shorter than socket_timeout"):
        QueueSettings(wait_replicas=1, wait_timeout=1.0, socket_timeout=0.3)
    QueueSettings(wait_timeout=1.0, socket_timeout=0.3)  # no WAIT is sent: nothing to refuse
    q = Queue.from_url(redis_url, queue_name, wait_replicas=1, wait_timeout=0.1, socket_timeout=0.3)
    with pytest.raises(ReplicationError):  # the test server has no replica
        q.enqueue("t", 1)
    q.close()
