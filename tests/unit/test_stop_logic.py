"""Stopping running attempts (time limits, cancels) in the worker's book-keeping, without a server."""

from __future__ import annotations

import time

from conveyor import Job
from conveyor._dispatch import Dispatcher, WorkerOptions
from conveyor._outcomes import stopped
from conveyor._replies import CANCEL, TIMEOUT


def _job(job_id: str, limit: float | None = None) -> Job:
    return Job(job_id, "t", "active", token="tok-" + job_id, attempts=1, max_attempts=3, time_limit=limit)


def _dispatcher(*jobs: Job) -> Dispatcher:
    d = Dispatcher(WorkerOptions(concurrency=2), lease=3.0)
    d.on_claimed(list(jobs))
    return d


def test_how_a_stopped_attempt_is_settled():
    job = _job("a", 0.25)
    assert (stopped(job, CANCEL, still_running=True).error, stopped(job, CANCEL, True).retry) == (
        "cancelled while running", False)  # fmt: skip
    timed_out = stopped(job, TIMEOUT, still_running=False)
    assert timed_out.error == "timed out: the attempt exceeded its time limit of 0.25 s"
    assert timed_out.retry
    running = stopped(job, TIMEOUT, still_running=True)
    assert not running.retry and "not retried" in running.error


def test_overdue_jobs_are_those_past_their_limit_not_yet_stopped():
    late, other = _job("late", 0.001), _job("other")
    d = _dispatcher(late, other)
    time.sleep(0.01)
    assert d.overdue() == [late]
    assert d.stop(late, TIMEOUT) is False  # not started: given back at once, never failed
    assert d.expired == [late] and d.failures == []
    assert late.cancelled and d.overdue() == []
    assert d.stop(late, TIMEOUT) is False and d.expired == [late]  # asked once only
    assert not d.on_started(late)  # no slot starts it once it is being given back


def test_a_slot_never_starts_a_buffered_job_whose_limit_passed_before_maintenance_saw_it():
    """Its limit passed in the buffer and a slot came free before the next maintenance tick: the
    slot started it anyway, past its limit, and the tick then failed it for good ('timed out ...
    not retried', its handler still running; the asyncio twin cancelled it at once, a retry
    spent). Found by an audit; the slot now gives it back uncounted, as the tick would have."""
    buffered = _job("b", 0.001)
    d = _dispatcher(buffered)
    time.sleep(0.01)
    assert d.on_started(buffered) is False
    assert d.expired == [buffered] and d.failures == [] and d.running == set()
    assert buffered.cancelled and d.overdue() == []


def test_a_job_whose_limit_passed_in_the_buffer_pauses_the_prefetch_until_a_handler_returns():
    running, buffered = _job("a"), _job("b", 0.001)
    d = Dispatcher(WorkerOptions(concurrency=1, prefetch=2), lease=3.0)
    d.on_claimed([running, buffered])
    d.on_started(running)
    time.sleep(0.01)
    d.stop(buffered, TIMEOUT)
    d.on_expired_released([buffered], [1])
    assert d.expired == [] and d.held == 1
    assert d.claim_budget(0) == 0 and not d.wants_marker()  # claimed again, it would wait again
    d.on_finished(running, None)
    assert d.claim_budget(1) == 3  # its slot is free: the prefetch is back


def test_a_running_thread_is_abandoned_keeps_its_slot_and_its_outcome_is_dropped():
    job = _job("a", 5)
    d = _dispatcher(job)
    d.on_started(job)
    assert d.stop(job, CANCEL) is True  # running: the caller interrupts or abandons it
    d.abandon(job)
    # (until its fail is sent the slot counts twice: one claim fewer for a moment, never one more)
    assert d.held == 2 and [f.error for f in d.failures] == ["cancelled while running"]
    d.on_failed(d.failures[0])
    assert d.held == 1 and not d.leases  # settled, but the thread still holds its slot
    assert d.claim_budget(0) == 1
    d.on_finished(job, None)  # the thread returned: nothing to ack
    assert d.held == 0 and not d.done


def test_a_finished_job_is_left_to_its_own_report():
    job = _job("a")
    d = _dispatcher(job)
    d.on_started(job)
    d.on_finished(job, None)
    assert d.stop(job, CANCEL) is False
    assert d.done == [job] and not d.failures


def test_heartbeat_statuses_that_ask_to_stop():
    jobs = [_job(str(i)) for i in range(4)]
    d = _dispatcher(*jobs)
    assert d.on_extended(jobs, [1, 2, 3, 0]) == [(jobs[1], CANCEL), (jobs[2], TIMEOUT)]


def test_heartbeats_leave_at_most_a_third_of_the_lease_between_them():
    job = _job("a")
    d = _dispatcher(job)
    assert d.needs_heartbeat(tick=1.0) == [job]  # lease 3 s, tick 1 s: due at every tick
    assert Dispatcher(WorkerOptions(), lease=30.0).needs_heartbeat(tick=1.0) == []


def test_a_late_wake_up_is_reported_only_when_it_puts_held_leases_at_risk(caplog):
    d = _dispatcher()
    d.woke_late(slept=5.0, tick=0.5)  # no lease held: nothing at risk
    d.on_claimed([_job("a")])
    d.woke_late(slept=0.5 + 0.9, tick=0.5)  # under a third of the 3 s lease
    assert caplog.text == ""
    d.woke_late(slept=0.5 + 1.0, tick=0.5)
    assert "worker woke 1.0 s late for its heartbeats" in caplog.text
    assert "lease of 3 s, the 1 jobs it holds may have been redelivered" in caplog.text


def test_a_refused_heartbeat_warns_only_for_a_job_with_no_ack_on_the_way(caplog):
    running, finished, settled = _job("j-run"), _job("j-fin"), _job("j-set")
    d = _dispatcher(running, finished, settled)
    d.on_finished(finished, None)
    d.on_sending(d.pending_acks())  # its ack+claim call is sent; the reply is cut off...
    d.on_released([settled])  # ...and this one was settled while the heartbeat was in flight
    d.on_extended([running, finished, settled], [0, 0, 0])  # ...and the server had applied it
    assert "lease of job j-run lost" in caplog.text
    assert "j-fin" not in caplog.text and "j-set" not in caplog.text
