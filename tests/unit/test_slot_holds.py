"""A worker's book-keeping of the limit-key slots held for stopped handlers that run on
(_slot_holds.py, through the Dispatcher), without a server: which holds it renews, which it ends,
whichever of the fail's reply and the handler's return comes first."""

from __future__ import annotations

import logging
import time

import pytest
from conveyor import Job
from conveyor._dispatch import Dispatcher, WorkerOptions
from conveyor._outcomes import stopped
from conveyor._replies import TIMEOUT


def _started(job_id: str) -> tuple[Dispatcher, Job]:
    job = Job(job_id, "t", "active", token="7" + job_id, attempts=1, max_attempts=3, time_limit=0.1)
    d = Dispatcher(WorkerOptions(concurrency=2), lease=3.0)
    d.on_claimed([job])
    assert d.on_started(job)
    return d, job


def _abandoned(job_id: str = "1") -> tuple[Dispatcher, Job]:
    """A thread past its time limit, abandoned: its fail is queued, asking for a hold."""
    d, job = _started(job_id)
    assert d.stop(job, TIMEOUT)
    d.abandon(job)
    [failure] = d.failures
    assert failure.hold and not failure.retry
    return d, job


def _fail_answered(d: Dispatcher, job: Job, member: str | None) -> None:
    job._held_slot = member  # as the fail's reply sets it
    d.on_failed(d.failures[0])


def test_a_hold_is_renewed_while_the_thread_runs_and_ended_once_it_returned():
    d, job = _abandoned()
    _fail_answered(d, job, "71{api")
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == (["71{api"], [])  # renewed every tick
    d.holds.on_answered(["71{api"], [], [1])
    assert d.holds.plan(tick=0.1, runs_on=d.runs_on) == ([], [])  # renewed just now
    assert d.quiet()  # a shutdown does not wait for the thread
    d.on_finished(job, None)  # the thread returned (its outcome dropped)
    assert d.done == [] and not d.quiet()  # its hold is still to end
    assert d.holds.plan(tick=0.1, runs_on=d.runs_on) == ([], ["71{api"])
    d.holds.on_answered([], ["71{api"], [1])
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], []) and d.quiet()


def test_a_thread_that_returned_before_the_fails_reply_ends_its_hold_at_once():
    d, job = _abandoned()
    d.on_finished(job, None)  # the thread returned while the fail was on its way
    _fail_answered(d, job, "71{api")
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], ["71{api"])


def test_no_hold_is_tracked_when_the_fail_held_none():
    d, job = _abandoned()
    _fail_answered(d, job, None)  # a key with a rate only, no limit key, or a re-sent fail
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], [])


def test_an_asyncio_workers_task_thread_is_seen_ending_by_polling():
    d, job = _started("1")
    job._thread_running = True  # an app's sync task, in a thread of an asyncio worker
    assert d.stop(job, TIMEOUT)
    d.on_finished(job, stopped(job, TIMEOUT, still_running=True))  # as AsyncWorker reports it
    _fail_answered(d, job, "71{api")
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == (["71{api"], [])
    job._thread_running = False  # its thread returned; nothing reports it
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], ["71{api"])


def test_a_hold_found_gone_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture):
    d, job = _abandoned()
    _fail_answered(d, job, "71{api")
    with caplog.at_level(logging.WARNING, logger="conveyor"):
        d.holds.on_answered(["71{api"], [], [0])  # recovery freed it: renewed too late
    assert "key 'api'" in caplog.text and "expired" in caplog.text
    time.sleep(0.01)
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], [])
    d.on_finished(job, None)
    assert d.holds.plan(tick=5.0, runs_on=d.runs_on) == ([], [])  # nothing left to end
