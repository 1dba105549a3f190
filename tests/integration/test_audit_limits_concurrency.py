"""Audit of priorities, per-key limits and delayed jobs under real concurrency (several workers,
failures with retries, lease recovery): each test failed before its fix, or pins a promise."""

from __future__ import annotations

import asyncio
import itertools
import random
import signal
import threading
import time

from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
    wait_until,
)
from conveyor import Backoff, JobSpec, Limit, Queue, Worker
from test_crash_and_load import _kill, _spawn, _wait

LIMITS = {"k1": 1, "k2": 2, "k3": 1}


def _running_hash(api) -> dict[bytes, bytes]:
    return api.admin.hgetall(f"cv:{{{api.name}}}:w:g")


async def test_per_key_limits_hold_under_several_workers_retries_and_delays(api):
    """Jobs of three keys (concurrency 1, 2, 1), at mixed priorities, some delayed, some failing
    their first attempt (retried at once or after a backoff), through four workers: no key ever
    runs more jobs at once than its limit, and every slot and parked count comes back to zero."""
    q = api.queue(maintenance_interval=0.1, max_attempts=3, backoff=Backoff(base=0.05, jitter=0))
    lock = threading.Lock()
    running = dict.fromkeys(LIMITS, 0)
    peak = dict.fromkeys(LIMITS, 0)
    attempts: dict[int, int] = {}

    def start(job):
        key = job.payload["k"]
        with lock:
            running[key] += 1
            peak[key] = max(peak[key], running[key])

    def finish(job):
        key, n = job.payload["k"], job.payload["n"]
        with lock:
            running[key] -= 1
            attempts[n] = attempts.get(n, 0) + 1
            first = attempts[n] == 1
        if first and n % 3 == 0:
            raise RuntimeError("first attempt fails")

    handler = api.handler(finish, start=start, sleep=0.005)
    rnd = random.Random(7)
    specs = []
    for n in range(90):
        key = rnd.choice(list(LIMITS))
        specs.append(JobSpec("t", {"k": key, "n": n}, limit=Limit(key, concurrency=LIMITS[key]),
                             priority=rnd.choice([0, 0, 3, 7]), delay=rnd.choice([0, 0, 0, 0.2])))
    for _ in range(4):
        api.worker(q, {"t": handler}, concurrency=3)
    await q.enqueue_many(specs)

    async def all_done() -> bool:
        return (await q.counts())["total_completed"] == len(specs)

    await wait_until(all_done, timeout=30, what="every limited job acknowledged")
    assert all(peak[k] <= LIMITS[k] for k in LIMITS), peak
    assert _running_hash(api) == {}
    assert int(api.admin.get(f"cv:{{{api.name}}}:w:pn") or 0) == 0
    assert await q.counts() == counts(total_completed=len(specs))


async def test_rate_reservations_claimed_late_together_do_not_start_together(api):
    """Jobs over a key's rate reserve starts an interval apart and wait in the delayed set. When
    every worker was busy until several of those starts had passed, the next claims started them
    all at once (each had a reservation, so none was checked): three starts of a 4/s key within a
    few ms, where production.md promises the rate holds over any window longer than the lateness.
    A job claimed more than a second (or an interval, if longer) after its reserved start now
    reserves again."""
    q = api.queue()
    limit, interval, lease = Limit("tenant-late", rate=4), 250, 30.0
    starts: dict[str, int] = {}

    async def claim() -> None:
        for job in await q.claim(count=4, lease=lease):
            deadline = api.admin.hget(q.inner.core.keys.job(job.id), "l")
            starts[job.id] = int(deadline) - round(lease * 1000)  # the claim's server time

    ids = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(4)])]
    await claim()
    assert list(starts) == ids[:1]
    assert await q.counts() == counts(delayed=3, active=1)
    await asyncio.sleep(2.2)  # the workers were busy: all three reserved starts passed, by over 1 s

    async def all_started() -> bool:
        await claim()
        return len(starts) == len(ids)

    await wait_until(all_started, timeout=10, what="every job started")
    times = sorted(starts.values())
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= interval / 2, f"starts {gaps} ms apart for a rate of one per {interval} ms"


async def test_a_freed_slot_releases_the_keys_highest_priority_parked_job_first(api):
    """Parked jobs of a key were released oldest first whatever their level: a level-0 job parked
    before a level-9 job of the same key ran first when the key's slot was freed, though both were
    waiting (parked jobs count as waiting) and every claim serves the highest level first."""
    q = api.queue()
    limit = Limit("tenant-levels", concurrency=1)
    [holder] = await q.enqueue_many([JobSpec("t", "holder", limit=limit)])
    [running] = await q.claim(count=1)
    assert running.id == holder.id
    await q.enqueue_many([JobSpec("t", "low", limit=limit)])
    assert await q.claim(count=1) == []  # parked
    await q.enqueue_many([JobSpec("t", "high", limit=limit, priority=9)])
    await q.enqueue_many([JobSpec("t", "mid", limit=limit, priority=5)])
    [gone] = await q.enqueue_many([JobSpec("t", "gone", limit=limit, priority=7)])
    assert await q.claim(count=3) == []  # all three parked
    assert await q.cancel(gone.id)  # a parked job of a level above 0 is found and removed
    assert await q.counts() == counts(waiting=3, active=1)
    order = []
    job = running
    for _ in range(3):
        [job] = await q.ack(job, claim=1)
        order.append(job.payload)
    assert order == ["high", "mid", "low"]
    await q.ack(job)
    assert await q.counts() == counts(total_completed=4)
    assert _running_hash(api) == {}


def test_a_killed_workers_slots_come_back_and_the_limit_holds_in_the_rescue(server, queue_name, tmp_path):
    """A worker process holding both slots of a concurrency-2 key is killed (SIGKILL) mid-job:
    lease recovery gives the slots back, two rescuing workers run every job of the key, never more
    than two at once, and no slot or parked count is left behind."""
    q = Queue.from_url(server.url, queue_name, lease=1.0, maintenance_interval=0.1)
    admin = server.client()
    limit = Limit("crash-key", concurrency=2)
    ids = {j.id for j in q.enqueue_many([JobSpec("crash", i, limit=limit, priority=i % 3) for i in range(8)])}
    started_file = tmp_path / "started"
    victim = _spawn("crash", server.url, queue_name, started_file)
    try:
        _wait(lambda: started_file.exists() and len(started_file.read_text().split()) == 2, 30,
              "the doomed worker to start two jobs", [victim])
        assert admin.hget(q.core.keys.waiting + ":g", "crash-key") == b"2"
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        _kill([victim])
    lock, running, peak, ran = threading.Lock(), [0], [0], []

    def handle(job):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
            ran.append(job.id)

    rescuers = [Worker(q, {"crash": handle}, concurrency=3, install_signal_handlers=False) for _ in range(2)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in rescuers]
    for t in threads:
        t.start()
    try:
        _wait(lambda: q.counts()["total_completed"] >= len(ids), 20, "the rescuers to finish every job")
    finally:
        for w in rescuers:
            w.stop()
        admin.zadd(q.core.keys.marker, {"test-stop": 0})
        for t in threads:
            t.join(10)
    assert sorted(ran) == sorted(ids)
    assert peak[0] <= 2
    assert admin.hgetall(q.core.keys.waiting + ":g") == {}
    assert int(admin.get(q.core.keys.parked) or 0) == 0
    assert q.counts() == counts(total_completed=len(ids))
    q.close()
    admin.close()


async def test_parked_jobs_released_by_one_call_start_oldest_first(api):
    """One ack of two jobs of a concurrency-2 key frees two slots and releases its two oldest
    parked jobs, each pushed to the claim end in turn: the younger one, pushed last, was claimed
    first (production.md: parked jobs are released oldest first within a level)."""
    q = api.queue()
    limit = Limit("tenant-pair", concurrency=2)
    ids = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(5)])]
    first = await q.claim(count=5)
    assert [j.id for j in first] == ids[:2]  # three parked, oldest first: ids[2], ids[3], ids[4]
    statuses, [claimed], _ = await q._run(q.inner.core.ack(first, claim=1))
    assert statuses == [1, 1]
    assert claimed.id == ids[2]
    assert [j.id for j in await q.claim(count=5)] == [ids[3]]


async def test_jobs_recovered_together_go_before_the_parked_jobs_they_release(api):
    """Lease recovery of both running jobs of a concurrency-2 key freed each slot in turn,
    releasing a parked job between the two recovered ones: claims then took the first recovered
    job, the younger parked job, the second recovered job and the older parked job, so a parked
    job started before both the job it waited for and the parked job older than it. Recovered
    jobs now go to the front, then the released ones, oldest first (as release.lua does)."""
    q = api.queue()
    limit = Limit("tenant-crash", concurrency=2)
    a, b, p1, p2 = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(4)])]
    assert [j.id for j in await q.claim(count=4, lease=0.1)] == [a, b]  # p1, p2 parked
    await asyncio.sleep(0.3)
    assert await q.recover() == (2, 0)
    assert [j.id for j in await q.jobs("waiting")] == [a, b, p1, p2]


async def test_jobs_released_together_go_before_the_parked_jobs_they_release(api):
    """release() of both running jobs of a concurrency-2 key: the same interleaving as lease
    recovery (each freed slot released a parked job between the released ones)."""
    q = api.queue()
    limit = Limit("tenant-stop", concurrency=2)
    a, b, p1, p2 = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(4)])]
    held = await q.claim(count=4)
    assert [j.id for j in held] == [a, b]
    assert await q.release(held) == [1, 1]
    assert [j.id for j in await q.jobs("waiting")] == [a, b, p1, p2]


async def test_a_released_job_parked_again_keeps_its_place_among_the_parked(api):
    """Recovery of a concurrency-1 key's running job released its oldest parked job p1 and put the
    recovered job in front of it; the recovered job took the slot again and p1, claimed next, was
    parked again at the young end of the key's list: the next freed slot released p2 before it."""
    q = api.queue()
    limit = Limit("tenant-turn", concurrency=1)
    a, p1, p2 = [j.id for j in await q.enqueue_many([JobSpec("t", i, limit=limit) for i in range(3)])]
    assert [j.id for j in await q.claim(count=3, lease=0.1)] == [a]  # p1, p2 parked
    await asyncio.sleep(0.3)
    assert await q.recover() == (1, 0)  # p1 released behind the recovered a
    [again] = await q.claim(count=3)  # a runs again; p1 is parked again
    assert again.id == a
    order = []
    job = again
    for _ in range(2):
        [job] = await q.ack(job, claim=1)
        order.append(job.id)
    assert order == [p1, p2]


async def test_a_freed_slot_passes_over_a_parked_id_whose_job_is_gone(api):
    """A level-5 job parked before parked jobs were split by level sits in the key's level-0 list,
    where cancel() (which looks in its level's list) does not find it: the job is deleted, its id
    stays parked. The next freed slot released that id alone (writing a stray hash for it) and the
    key's other parked job waited for a slot that was free, for ever."""
    q = api.queue()
    limit = Limit("tenant-upgrade", concurrency=1)
    [holder] = await q.enqueue_many([JobSpec("t", "holder", limit=limit)])
    [running] = await q.claim(count=1)
    assert running.id == holder.id
    old = (await q.enqueue_many([JobSpec("t", "old", limit=limit, priority=5)]))[0].id
    assert await q.claim(count=1) == []  # parked at level 5
    base = f"cv:{{{api.name}}}:w"
    api.admin.lrem(f"{base}:p5:tenant-upgrade", 1, old)  # as the previous layout parked it
    api.admin.lpush(f"{base}:p:tenant-upgrade", old)
    [other] = await q.enqueue_many([JobSpec("t", "other", limit=limit)])
    assert await q.claim(count=1) == []  # parked behind it
    assert await q.cancel(old)
    [next_job] = await q.ack(running, claim=1)
    assert next_job.id == other.id
    assert api.admin.exists(q.inner.core.keys.job(old)) == 0
    await q.ack(next_job)
    assert await q.counts() == counts(total_completed=2)
