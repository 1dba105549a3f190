"""AsyncWorker with two pumps (lanes): exactly once, connections, wake-ups, shutdown, bad input."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from conveyor import AsyncQueue, AsyncWorker, QueueSettings
from conveyor._lanes import pump_count, split


def _roles(url: str, name: str) -> list[str]:
    prefix = f"conveyor:{name}:"
    with redis.Redis.from_url(url, decode_responses=True) as admin:
        names = [c.get("name", "") for c in admin.client_list()]
    return sorted(n[len(prefix):] for n in names if n.startswith(prefix))


async def _until(check, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_two_pumps_run_every_job_exactly_once(redis_url, queue_name):
    q = AsyncQueue.from_url(redis_url, queue_name, settings=QueueSettings(keep_completed=-1))
    seen: list[str] = []

    async def work(job):
        seen.append(job.id)
        await asyncio.sleep(0)

    jobs = []
    for start in range(0, 3000, 1000):
        jobs += await q.enqueue_many([("work", i) for i in range(start, start + 1000)])
    worker = AsyncWorker(q, {"work": work}, concurrency=16, burst=True, install_signal_handlers=False)
    stats = await worker.run()
    assert stats["processed"] == 3000
    assert sorted(seen) == sorted(j.id for j in jobs)  # none twice, none lost
    assert (await q.counts())["total_completed"] == 3000
    await q.aclose()


async def test_two_pumps_hold_five_connections_and_wake_at_once(redis_url, queue_name):
    q = AsyncQueue.from_url(redis_url, queue_name)
    started: list[float] = []

    async def nap(job):
        started.append(time.monotonic())
        await asyncio.sleep(0.3)

    worker = AsyncWorker(q, {"nap": nap}, concurrency=8, block_timeout=30.0, install_signal_handlers=False)
    assert worker.stats == {"processed": 0, "failed": 0, "held": 0}
    run = asyncio.create_task(worker.run())

    async def idle() -> bool:
        return _roles(redis_url, queue_name) == ["maint", "maint", "pump", "pump", "waiter"]

    await _until(idle, 10, "2 pump, 2 maint and 1 waiter connections")
    await asyncio.sleep(0.3)  # the waiter is blocked (a 30 s wait): only a wake-up explains a pickup
    t0 = time.monotonic()
    await q.enqueue_many([("nap", i) for i in range(8)])  # more than one lane's 4 slots

    async def all_started() -> bool:
        return len(started) == 8

    await _until(all_started, 5, "8 naps started")
    assert max(started) - t0 < 1.0, "the second lane did not wake at once"
    worker.stop()
    stats = await asyncio.wait_for(run, 10)
    assert stats["processed"] == 8  # stop() let both lanes finish their running jobs
    assert (await q.counts())["total_completed"] == 8
    await _until(lambda: _none_left(redis_url, queue_name), 5, "connections closed")
    await q.aclose()


async def _none_left(url: str, name: str) -> bool:
    return _roles(url, name) == []


def test_pump_count_defaults_and_bad_input():
    assert [pump_count(None, c) for c in (1, 4, 7, 8, 100)] == [1, 1, 1, 2, 2]
    assert pump_count(3, 3) == 3
    assert split(7, 2) == [4, 3] and split(1, 2) == [1, 0]
    for bad in (0, 9, True, 1.5, "2"):
        with pytest.raises(ValueError, match=r"pumps must be an int in 1\.\.8"):
            pump_count(bad, 32)
    with pytest.raises(ValueError, match=r"pumps \(3\) cannot exceed concurrency \(2\)"):
        pump_count(3, 2)


async def test_bad_pumps_are_refused_at_construction(redis_url, queue_name):
    q = AsyncQueue.from_url(redis_url, queue_name)

    async def work(job):
        return None

    with pytest.raises(ValueError, match="pumps"):
        AsyncWorker(q, {"work": work}, concurrency=4, pumps=5)
    one = AsyncWorker(q, {"work": work}, concurrency=32, pumps=1)
    assert one._lanes == []
    await q.aclose()


def _script_calls(url: str) -> int:
    with redis.Redis.from_url(url, decode_responses=True) as admin:
        stats = admin.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval", "fcall"))


async def _calls_for_one_job(url: str, name: str, pumps: int) -> int:
    """Script calls (EVALSHA, EVAL, FCALL) the server ran for one job enqueued to an idle worker."""
    q = AsyncQueue.from_url(url, name, settings=QueueSettings(maintenance_interval=60.0))
    done = asyncio.Event()

    async def work(job):
        done.set()

    worker = AsyncWorker(q, {"work": work}, concurrency=8, pumps=pumps, block_timeout=30.0,
                         install_signal_handlers=False)
    run = asyncio.create_task(worker.run())

    async def idle() -> bool:  # (maint connects at the first heartbeat or sweep)
        roles = _roles(url, name)
        return roles.count("pump") == pumps and "waiter" in roles

    await _until(idle, 10, "the worker's pump and waiter connections")
    await asyncio.sleep(0.5)  # every lane past its first (empty) claim, waiting on the marker
    before = _script_calls(url)
    await q.enqueue("work", 1)
    await asyncio.wait_for(done.wait(), 5)

    async def acked() -> bool:
        return (await q.counts())["total_completed"] == 1

    await _until(acked, 5, "the ack")
    await asyncio.sleep(0.3)  # room for a stray claim to show
    calls = _script_calls(url) - before
    worker.stop()
    await asyncio.wait_for(run, 10)
    await q.aclose()
    return calls


async def test_a_wake_up_sends_one_claim_not_one_per_lane(redis_url, queue_name):
    """One job to an idle two-pump worker costs the server no more script calls than with one
    pump: the other lane sends no empty claim (it did, one per wake-up, when every lane with a
    free slot was woken)."""
    warm = AsyncQueue.from_url(redis_url, queue_name + "-warm")
    await warm.enqueue("work", 0)  # the enqueue script is loaded before anything is counted
    await warm.aclose()
    one = await _calls_for_one_job(redis_url, queue_name + "-one", pumps=1)
    two = await _calls_for_one_job(redis_url, queue_name + "-two", pumps=2)
    assert two == one, f"{two} script calls with two pumps, {one} with one"
