"""The asyncio runner's executor: results and errors reach the caller, and shutdown never waits."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from conveyor._daemon_pool import DaemonThreadPool


def test_results_errors_and_a_thread_per_call_in_flight_idle_ones_reused():
    pool = DaemonThreadPool(thread_name_prefix="t")
    assert pool.submit(lambda x: x * 2, 21).result(5) == 42
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(5)
    time.sleep(0.05)  # the thread that ran both is idle again
    gate = threading.Event()
    futures = [pool.submit(gate.wait, 5) for _ in range(5)]
    names = {t.name for t in threading.enumerate() if t.name.startswith("t_")}
    assert names == {f"t_{i}" for i in range(5)}  # the idle one reused, none queued behind another
    assert all(t.daemon for t in threading.enumerate() if t.name in names)
    gate.set()
    assert [f.result(5) for f in futures] == [True] * 5
    pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)


def test_a_call_never_waits_behind_one_still_running():
    """A thread past its time limit runs on while its slot serves the next job: the next call
    gets a thread at once (with a thread per slot it waited, and its own limit passed)."""
    pool = DaemonThreadPool(thread_name_prefix="late")
    gate = threading.Event()
    stuck = pool.submit(gate.wait, 10)
    assert pool.submit(lambda: "ran").result(2) == "ran"
    gate.set()
    assert stuck.result(5) is True
    pool.shutdown()


def test_asyncio_run_returns_while_a_thread_still_runs():
    # The stock executor makes asyncio.run wait for the thread (here 5 s).
    release = threading.Event()

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(DaemonThreadPool("late"))
        task = asyncio.ensure_future(asyncio.to_thread(release.wait, 5))
        await asyncio.sleep(0.1)
        task.cancel()

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 2
    release.set()


def test_shutdown_cancels_queued_work_on_request():
    pool = DaemonThreadPool(thread_name_prefix="q")
    gate = threading.Event()
    running = pool.submit(gate.wait, 5)
    time.sleep(0.05)
    pool._free.release()  # as if a thread were idle: the next call is queued, not given a thread
    queued = pool.submit(time.sleep, 0)
    pool.shutdown(cancel_futures=True)
    assert queued.cancelled()
    gate.set()
    assert running.result(5) is True
