"""Audit of the documentation as a new user reads it: the API reference (docs/api.md, rendered from
the docstrings) and the pages' claims about what a call returns. Each test failed before its fix."""

from __future__ import annotations

import dataclasses
import inspect
import threading
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from _support import api_fixture  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import AsyncQueue, ConveyorError, Job, JobFailedError, Queue, Worker


async def test_fail_returns_only_the_outcomes_its_reference_names(api):
    """The reference said fail() returns 'retry' or 'failed'; on a job whose cancel was requested
    (production.md: "queue.fail(job, ...) then settles it as cancelled") it returns 'cancelled', so
    code that matched the two documented outcomes took a cancelled job for a retried one."""
    q = api.queue(max_attempts=3)
    job = await q.enqueue("t", 1)
    [claimed] = await q.claim()
    assert await q.cancel(job.id)
    await q.extend(claimed)
    assert claimed.cancelled
    outcome = await q.fail(claimed, "stopped")
    assert outcome == "cancelled"
    assert (await q.get_job(job.id)).state == "cancelled"
    for cls in (Queue, AsyncQueue):
        assert f"'{outcome}'" in (cls.fail.__doc__ or ""), f"{cls.__name__}.fail does not name {outcome!r}"


async def test_waiting_for_a_job_enqueue_many_to_sent_to_another_queue_names_that_queue(api):
    """high-availability.md's enqueue_many_to example returns jobs of other queues. Their
    job.result() raised "was not returned by a queue; use queue.result(job_id)": followed on the
    queue that sent them, that advice waited for (and returned) the result of another job, the
    one of the same id in the sending queue. The error now names the job's own queue."""
    sender = api.queue(store_results=True)
    other = f"{sender.name}-other"
    own = await sender.enqueue("t", 1)
    [elsewhere] = (await sender.enqueue_many_to({other: [("t", 2)]}))[other]
    assert elsewhere.id == own.id  # ids are per queue: the advice's queue.result() found `own`
    with pytest.raises(ConveyorError, match=f"queue '{other}'"):
        await _awaited(elsewhere.result(timeout=0))


async def _awaited(value):
    return await value if inspect.isawaitable(value) else value


async def test_what_a_worker_run_returns_is_documented(api):
    """index.md's quick start ends with `Worker(...).run()`; the reference did not say what run()
    returns, nor what ``stats`` holds (no docstring): processed counted completed jobs only (the
    `conveyor worker` log calls it "completed"), failed every failed attempt, held the slots in use."""
    q = api.queue(max_attempts=1)
    await q.enqueue("ok", 1)
    await q.enqueue("bad", 2)

    def boom(job):
        raise RuntimeError("boom")

    worker = api.worker(q, {"ok": api.handler(), "bad": api.handler(boom)}, burst=True)
    stats = await worker.join(30)
    assert stats == {"processed": 1, "failed": 1, "held": 0}
    cls = type(worker.worker)
    for key in stats:
        assert f"``{key}``" in (cls.run.__doc__ or ""), f"{cls.__name__}.run does not say what {key!r} is"
    assert (cls.stats.__doc__ or "").strip(), f"{cls.__name__}.stats has no docstring"


async def test_a_job_id_deduplicated_after_its_record_went_returns_a_documented_job(api):
    """production.md, Deduplication window: within dedup_window, an id whose job finished (its
    record dropped at the ack, keep_completed=0) creates nothing. The enqueue then returned a Job
    in state 'finished' with an empty task: a state the docs' six never named, nor the reference
    (the Job docstring described none of its fields but token, time_limit and stop_reason)."""
    q = api.queue(dedup_window=60)
    await q.enqueue("t", 1, job_id="order-1")
    [claimed] = await q.claim()
    await q.ack(claimed)
    again = await q.enqueue("t", 2, job_id="order-1")
    assert (again.created, again.state, again.task, again.payload) == (False, "finished", "", None)
    doc = Job.__doc__ or ""
    fields = [f.name for f in dataclasses.fields(Job) if not f.name.startswith("_")]
    undescribed = [name for name in fields if f"``{name}``" not in doc]
    assert undescribed == [], f"the Job docstring does not describe {undescribed}"
    assert "``finished``" in doc
    production = (Path(__file__).resolve().parents[2] / "docs" / "production.md").read_text()
    dedup = production[production.index("## Deduplication window") :].split("\n## ", 1)[0]
    assert "`finished`" in dedup


@pytest.mark.parametrize("finished_first", [True, False], ids=["finished-before", "waited-for"])
async def test_a_client_that_decodes_replies_reads_results(server, queue_name, finished_first):
    """`Queue(name, client)` with a redis-py client made with decode_responses=True is supported
    (test_direct_scripts: it reads the same jobs), but with store_results its job.result() raised
    AttributeError ('str' object has no attribute 'decode') for a job that had finished, and
    `queue.result()` the same: the result record came back as text, which the decoder took for bytes."""
    producer = Queue(queue_name, redis.Redis.from_url(server.url, decode_responses=True), store_results=True)
    decoding = aredis.Redis.from_url(server.url, decode_responses=True)
    reader = AsyncQueue(queue_name, decoding, store_results=True)
    ok, bad = producer.enqueue("ok", {"name": "Zoë"}), producer.enqueue("bad", None, max_attempts=1)

    def fail(job):
        raise RuntimeError("broken: ü")

    worker = Worker(Queue.from_url(server.url, queue_name, store_results=True),
                    {"ok": lambda job: job.payload["name"], "bad": fail}, burst=finished_first,
                    install_signal_handlers=False)  # fmt: skip
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    if finished_first:
        thread.join(30)
    assert ok.result(timeout=10) == "Zoë"
    assert await reader.result(ok.id, timeout=10) == "Zoë"
    with pytest.raises(JobFailedError, match="broken: ü"):
        bad.result(timeout=10)
    with pytest.raises(JobFailedError, match="broken: ü"):
        await reader.result(bad.id, timeout=10)
    worker.stop()
    thread.join(30)
    producer.close()
    await reader.aclose()
