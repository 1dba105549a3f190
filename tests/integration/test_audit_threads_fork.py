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
