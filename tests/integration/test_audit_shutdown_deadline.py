"""The shutdown deadline of the `conveyor worker` command (a Runner) counts from the stop request."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from conveyor import Conveyor
from conveyor._runner import Runner

SOCKET_TIMEOUT = 2.0
SHUTDOWN_TIMEOUT = 0.2


@contextlib.contextmanager
def _writes_paused(url: str) -> Iterator[None]:
    admin = redis.Redis.from_url(url)
    admin.client_pause(8000, all=False)
    try:
        yield
    finally:
        admin.client_unpause()
        admin.close()


def _seconds_to_stop(runner: Runner, thread: threading.Thread) -> float:
    started = time.monotonic()
    runner.stop()
    thread.join(timeout=15)
    return time.monotonic() - started


@pytest.mark.parametrize("tasks", ["sync", "async"])
def test_a_stop_while_the_pump_waits_on_a_server_that_stopped_answering_keeps_its_deadline(
    server, redis_url, queue_name, tasks
):
    """The deadline was counted from when the pump noticed the stop: a pump stuck in a call to a
    server that stopped answering (writes paused, as in a failover) noticed it only when that call
    timed out, then started a new deadline and a new call, which timed out too. SIGTERM with
    --shutdown-timeout 2 took 18 s (two socket timeouts past the signal, not one), past a
    supervisor's grace period of --shutdown-timeout plus socket_timeout (production.md)."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: CLIENT PAUSE WRITE is checked on Redis and Valkey")
    app = Conveyor(redis_url, default_queue=queue_name, socket_timeout=SOCKET_TIMEOUT)
    if tasks == "sync":

        @app.task
        def idle() -> None:
            pass

    else:

        @app.task
        async def idle_async() -> None:
            pass

    runner = Runner(app, [queue_name], concurrency=1, shutdown_timeout=SHUTDOWN_TIMEOUT, block_timeout=0.05)
    thread = threading.Thread(target=runner.run)
    thread.start()
    time.sleep(1.0)
    with _writes_paused(redis_url):  # as in a failover: the idle pump's next call hangs at once
        time.sleep(0.3)
        took = _seconds_to_stop(runner, thread)
    assert not thread.is_alive()
    # the call in flight at the stop may take socket_timeout; the deadline passed before it ended
    assert took < SOCKET_TIMEOUT + SHUTDOWN_TIMEOUT + 0.5, f"run() returned {took:.1f} s after stop()"
    app.close()
