"""Automatic batching of concurrent enqueues (QueueSettings.batch_enqueue) on real servers.

Concurrent callers are asyncio tasks (async surface) or threads (sync surface: each call runs in
a worker thread of the loop's executor). Script calls are counted by wrapping the queue's
``_evalsha``, which runs once per script call, so the tests do not depend on timing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import InvalidNameError, JobSpec, Limit

CALLERS = 120


def count_calls(q: Any) -> list[int]:
    """Record the number of jobs of every script call the queue sends from now on."""
    inner, sizes = q.inner, []
    send = inner._evalsha

    def counted(call: Any, *path: Any) -> Any:  # path: the connection path _run chose
        if call.script.name == "enqueue":
            sizes.append((len(call.args) - 1) // 5)  # the window, then 5 values per job
        return send(call, *path)

    inner._evalsha = counted
    return sizes


def hold_first_fail_second(q: Any) -> tuple[list[int], threading.Event]:
    """From now on the queue's first enqueue script call waits for the returned event (then is
    sent), and its second fails with a connection error without being sent; the list records
    every call's job count."""
    inner, sizes, release = q.inner, [], threading.Event()
    send = inner._evalsha

    def before(call: Any) -> int:
        sizes.append((len(call.args) - 1) // 5)
        if len(sizes) == 2:
            raise redis.ConnectionError("injected: the connection was lost")
        return len(sizes)

    async def held_async(call: Any, *path: Any) -> Any:
        if before(call) == 1:
            while not release.is_set():
                await asyncio.sleep(0.005)
        return await send(call, *path)

    def held_sync(call: Any, *path: Any) -> Any:
        if before(call) == 1:
            release.wait(30)
        return send(call, *path)

    inner._evalsha = held_async if q.surface == "async" else held_sync
    return sizes, release


async def test_a_second_call_goes_out_while_one_is_in_flight_and_its_error_stays_in_it(api):
    """Callers arriving while a call is in flight go out as a second call (not after the first
    returns); a connection error on it reaches its callers only, the others' jobs are stored."""
    q = api.queue(batch_enqueue=True)
    sizes, release = hold_first_fail_second(q)
    first = asyncio.create_task(q.enqueue("t", {"n": 0}))
    while not sizes:
        await asyncio.sleep(0.005)
    burst = [asyncio.create_task(q.enqueue("t", {"n": n})) for n in range(1, 4)]
    outcomes = await asyncio.wait_for(asyncio.gather(*burst, return_exceptions=True), 20)
    assert not first.done()  # the burst did not wait for the call in flight
    release.set()
    assert (await first).payload == {"n": 0}
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(failed) == sizes[1] >= 1
    assert all("injected" in str(exc) for exc in failed)
    stored = [o for o in outcomes if not isinstance(o, BaseException)]
    assert sorted(job.payload["n"] for job in stored) == sorted(
        {1, 2, 3} - {n for n in range(1, 4) if isinstance(outcomes[n - 1], BaseException)})
    assert await q.counts() == counts(waiting=4 - sizes[1])


async def test_concurrent_callers_share_script_calls_and_each_gets_its_own_job(api):
    q = api.queue(batch_enqueue=True)
    sizes = count_calls(q)
    jobs = await asyncio.gather(*(q.enqueue("t", {"n": i}) for i in range(CALLERS)))
    assert len({job.id for job in jobs}) == CALLERS and all(job.created for job in jobs)
    for i, job in enumerate(jobs):
        assert job.task == "t" and job.state == "waiting"
        assert (await q.get_job(job.id)).payload == {"n": i}
    assert await q.counts() == counts(waiting=CALLERS)
    assert sum(sizes) == CALLERS
    assert len(sizes) < CALLERS and max(sizes) > 1  # some calls carried several callers' jobs


async def test_a_lone_caller_sends_one_single_job_call_per_enqueue(api):
    q = api.queue(batch_enqueue=True)
    sizes = count_calls(q)
    for i in range(5):
        job = await q.enqueue("t", {"n": i}, delay=60 if i == 4 else 0)
        assert job.created
    assert sizes == [1, 1, 1, 1, 1]
    assert await q.counts() == counts(waiting=4, delayed=1)


async def test_a_bad_job_fails_only_its_caller(api):
    q = api.queue(batch_enqueue=True)
    calls = []
    for i in range(CALLERS):
        if i % 10 == 3:
            calls.append(q.enqueue("bad{task}", {"n": i}))
        elif i % 10 == 7:
            calls.append(q.enqueue("t", {"n": i}, max_attempts=0))
        else:
            calls.append(q.enqueue("t", {"n": i}))
    results = await asyncio.gather(*calls, return_exceptions=True)
    for i, result in enumerate(results):
        if i % 10 == 3:
            assert isinstance(result, InvalidNameError)
        elif i % 10 == 7:
            assert isinstance(result, ValueError) and "max_attempts" in str(result)
        else:
            assert not isinstance(result, BaseException), result
            assert (await q.get_job(result.id)).payload == {"n": i}
    assert await q.counts() == counts(waiting=CALLERS - 2 * CALLERS // 10)


async def test_idempotent_ids_in_one_batch_and_across_batches(api):
    q = api.queue(batch_enqueue=True)
    first = await q.enqueue("t", {"v": "old"}, job_id="existing")
    sizes = count_calls(q)
    calls = [q.enqueue("t", {"v": i}, job_id="same") for i in range(20)]
    calls += [q.enqueue("t", {"v": "new"}, job_id="existing") for _ in range(5)]
    calls += [q.enqueue("t", {"v": i}) for i in range(40)]
    jobs = await asyncio.gather(*calls)
    same, existing, fresh = jobs[:20], jobs[20:25], jobs[25:]
    assert {j.id for j in same} == {"same"} and sum(j.created for j in same) == 1
    created = next(j for j in same if j.created)
    for job in same:
        assert job.payload == created.payload  # the stored job, whoever created it
    assert all(not j.created and j.id == first.id and j.payload == {"v": "old"} for j in existing)
    assert all(j.created for j in fresh) and len({j.id for j in fresh}) == 40
    assert await q.counts() == counts(waiting=1 + 1 + 40)
    assert sum(sizes) == 65


@pytest.mark.parametrize("batching", [False, True, None])
async def test_the_setting_off_sends_every_enqueue_alone(api, batching):
    """Off: one script call per enqueue; on, and by default (None): concurrent ones share calls."""
    q = api.queue() if batching is None else api.queue(batch_enqueue=batching)
    sizes = count_calls(q)
    await asyncio.gather(*(q.enqueue("t", i) for i in range(CALLERS)))
    assert sum(sizes) == CALLERS
    if batching is False:
        assert sizes == [1] * CALLERS
    else:
        assert max(sizes) > 1


async def test_enqueue_many_to_fills_each_queue_in_one_pipeline(api):
    """One server: every queue's batch goes out in one pipeline (one group), each queue atomic."""
    q = api.queue()
    names = [q.inner.name, q.inner.name + "-b", q.inner.name + "-c"]
    jobs = await q.enqueue_many_to({name: [("t", {"q": name, "i": i}) for i in range(3)] for name in names})
    assert list(jobs) == names
    for name in names:
        assert [job.payload for job in jobs[name]] == [{"q": name, "i": i} for i in range(3)]
        assert await api.queue(name).counts() == counts(waiting=3)
    batch = {names[1]: [JobSpec("t", None, job_id="given")]}
    assert (await q.enqueue_many_to(batch))[names[1]][0].created
    assert not (await q.enqueue_many_to(batch))[names[1]][0].created  # re-sending is harmless
    assert await api.queue(names[1]).counts() == counts(waiting=4)


async def test_enqueue_many_to_refuses_a_bad_queue_name_before_sending(api):
    q = api.queue()
    with pytest.raises(InvalidNameError, match="hash tag"):
        await q.enqueue_many_to({q.inner.name: [("t", 1)], "a{b}": [("t", 1)]})
    assert await q.counts() == counts()


async def test_a_batch_mixing_common_jobs_and_jobs_with_options_keeps_its_order(api):
    """Common jobs and jobs with options (sent differently: see QueueCore.pack) wait in one FIFO."""
    q = api.queue()
    limit = Limit("k", concurrency=5)
    specs = [JobSpec("t", 0), JobSpec("t", 1, time_limit=5), JobSpec("t", 2), JobSpec("t", 3, limit=limit)]
    await q.enqueue_many(specs)
    claimed = await q.claim(4)
    assert [job.payload for job in claimed] == [0, 1, 2, 3]
    assert [job.time_limit for job in claimed] == [None, 5, None, None]
