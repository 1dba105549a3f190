"""A job id's stored result belongs to the job that has that id now: a failed job given a fresh
start (retry_failed) or a new job enqueued with a finished job's id never answers with the old
job's record. Both read the old record before: result() returned it at once, while the new
attempt waited, and kept returning it after the new attempt completed under workers that do not
store results (mixed settings). The operator's client may not store results itself."""

from __future__ import annotations

import pytest
from _support import api_fixture  # noqa: F401 - api_fixture provides the `api` fixture
from conveyor import ConveyorError, JobFailedError


async def _fail_for_good(q) -> str:
    job = await q.enqueue("flaky", None, max_attempts=1)
    [claimed] = await q.claim()
    await q.fail(claimed, "the first attempt failed", retry=False)
    with pytest.raises(JobFailedError, match="the first attempt failed"):
        await q.result(job.id, 0)
    return job.id


@pytest.mark.parametrize("operator_stores", [True, False], ids=["operator-stores", "operator-does-not"])
async def test_retry_failed_forgets_the_old_failure(api, operator_stores):
    q = api.queue(store_results=True, keep_failed=-1)
    operator = api.queue(store_results=operator_stores, keep_failed=-1)
    job_id = await _fail_for_good(q)
    assert await operator.retry_failed([job_id]) == 1
    with pytest.raises(TimeoutError):  # waiting for its new attempt: no result yet
        await q.result(job_id, 0.05)
    [claimed] = await q.claim()
    await q.ack(claimed, result="second attempt")
    assert await q.result(job_id, 0) == "second attempt"


async def test_retry_failed_then_success_under_workers_that_store_nothing(api):
    q = api.queue(store_results=True, keep_failed=-1)
    plain = api.queue(keep_failed=-1)  # a worker's queue without store_results
    job_id = await _fail_for_good(q)
    await q.retry_failed([job_id])
    [claimed] = await plain.claim()
    await plain.ack(claimed)
    with pytest.raises(ConveyorError, match="has no stored result"):  # not the old failure
        await q.result(job_id, 0.05)


@pytest.mark.parametrize("producer_stores", [True, False], ids=["producer-stores", "producer-does-not"])
async def test_a_new_job_with_a_finished_jobs_id_has_no_result_yet(api, producer_stores):
    q = api.queue(store_results=True)  # keep_completed=0: the finished job's hash goes at ack
    producer = api.queue(store_results=producer_stores)
    first = await q.enqueue("report", None, job_id="report-42")
    [claimed] = await q.claim()
    await q.ack(claimed, result="first report")
    assert await q.result(first.id, 0) == "first report" and await q.get_job(first.id) is None
    again = await producer.enqueue("report", None, job_id="report-42")
    assert (again.id, again.state) == ("report-42", "waiting")  # a new job, not the old one
    with pytest.raises(TimeoutError):
        await q.result("report-42", 0.05)
    [claimed] = await q.claim()
    await q.ack(claimed, result="second report")
    assert await q.result("report-42", 0) == "second report"


async def test_a_job_replacing_one_past_its_dedup_window_has_no_result_yet(api):
    q = api.queue(store_results=True, keep_completed=-1, dedup_window=0)
    await q.enqueue("report", None, job_id="report-7")
    [claimed] = await q.claim()
    await q.ack(claimed, result="first report")
    again = await q.enqueue("report", None, job_id="report-7")  # window 0: replaces the finished job
    assert again.state == "waiting"
    with pytest.raises(TimeoutError):
        await q.result("report-7", 0.05)


async def test_a_new_job_with_a_finished_jobs_id_finished_by_a_worker_that_stores_nothing(api):
    q = api.queue(store_results=True)
    plain = api.queue()  # a worker's queue without store_results
    await q.enqueue("report", None, job_id="report-9")
    [claimed] = await q.claim()
    await q.ack(claimed, result="first report")
    await q.enqueue("report", None, job_id="report-9")
    [claimed] = await plain.claim()
    await plain.ack(claimed)
    with pytest.raises(ConveyorError, match="has no stored result"):  # not the first job's result
        await q.result("report-9", 0.05)
