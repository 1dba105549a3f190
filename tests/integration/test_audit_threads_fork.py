"""Audit of a sync Queue shared by threads and across fork(): each test failed before its fix."""

from __future__ import annotations

import threading
import time

import pytest
from _support import fork_child
from conveyor import Queue

TIMEOUT = 10.0


def test_a_child_forked_while_the_parents_result_reader_runs_gets_its_results(
    redis_url: str, queue_name: str
) -> None:
    """gunicorn --preload: the parent waited for a result, then the workers fork. Its result
    reader runs on for up to a second after its last waiter left. Before, a child forked then
    kept the parent's 'a reader runs' (and its lock, maybe held): no thread of the child reads,
    so every result() in the child waited out its timeout (or for ever) although the job was done."""
    q = Queue.from_url(redis_url, queue_name, store_results=True)
    first = q.enqueue("t", 1)
    with pytest.raises(TimeoutError):
        q.result(first.id, timeout=0.05)
    assert q._results.registry.running  # the parent's reader still reads (its XREAD blocks 1 s)

    def child() -> str:
        job = q.enqueue("t", 2)

        def finish() -> None:
            time.sleep(0.3)  # after the wait below has started
            for claimed in q.claim(2):
                q.ack(claimed, result=claimed.payload * 10)

        threading.Thread(target=finish, daemon=True).start()
        return repr(q.result(job.id, timeout=TIMEOUT / 2))

    assert fork_child(child, TIMEOUT)() == "20"
    q.close()


def test_a_result_reader_that_could_not_start_is_started_by_the_next_waiter(
    redis_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process at its thread limit (a container's pids limit, a large WSGI thread pool) cannot
    start the result reader: that result() raises RuntimeError. Before, the queue still noted
    'a reader runs', so no later waiter started one: every result() of the queue waited out its
    timeout (or for ever), also once threads could be started again."""
    q = Queue.from_url(redis_url, queue_name, store_results=True)
    job = q.enqueue("t", 1)
    start, refused = threading.Thread.start, []

    def start_unless_first_reader(thread: threading.Thread) -> None:
        if thread.name == "conveyor-results" and not refused:
            refused.append(thread)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_unless_first_reader)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        q.result(job.id, timeout=TIMEOUT)

    def finish() -> None:
        time.sleep(0.3)  # after the wait below has started
        for claimed in q.claim(1):
            q.ack(claimed, result=claimed.payload * 10)

    threading.Thread(target=finish, daemon=True).start()
    assert q.result(job.id, timeout=TIMEOUT / 2) == 10
    q.close()
