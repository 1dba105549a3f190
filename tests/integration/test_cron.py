"""Periodic jobs: competing schedulers fire each time exactly once, across a simulated downtime."""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from conveyor import Conveyor, Limit, UnknownTaskError, acl_rules
from conveyor._runner import Runner
from conveyor._schedule import Schedule
from conveyor._scheduler import Scheduler, fire_call

T0 = 1_800_000_000  # a multiple of 20, 30 and 60 seconds
STEP = 2
BEFORE = [T0 + STEP * i for i in range(1, 121)]  # 240 s of ticks every 2 s
AFTER = [T0 + 2017 + STEP * i for i in range(120)]  # the schedulers were all down for ~30 min


def _app(redis_url: str, queue_name: str) -> Conveyor:
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task(time_limit=90)
    def report(kind: str, *, verbose: bool = False) -> None:
        pass

    app.periodic("minutely", report, cron="* * * * *", tz="Europe/Paris", args=("m",))
    app.periodic("every-20s", "report", every=20, kwargs={"kind": "e", "verbose": True})
    app.periodic("skip-30s", report, every=30, missed="skip", grace=5, args=("s",))
    return app


def _expected(name: str, period: int, fire_after_downtime: bool) -> list[str]:
    fires = [m for m in range(T0 + 1, BEFORE[-1] + 1) if m % period == 0]
    first_after = AFTER[0]
    if fire_after_downtime:
        fires.append(first_after // period * period)
    fires += [m for m in range(first_after + 1, AFTER[-1] + 1) if m % period == 0]
    return [f"cron:{name}:{m * 1000}" for m in fires]


def test_three_competing_schedulers_fire_each_time_exactly_once(redis_url, queue_name):
    apps = [_app(redis_url, queue_name) for _ in range(3)]
    schedulers = [Scheduler(app) for app in apps]
    barrier = threading.Barrier(3)
    created: list[list[str]] = [[] for _ in schedulers]

    def run(i: int) -> None:
        schedulers[i].tick(now=T0)  # first sighting: stores the next fire times, enqueues nothing
        for now in BEFORE + AFTER:
            barrier.wait(timeout=60)
            created[i] += schedulers[i].tick(now=now)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(thread.is_alive() for thread in threads)

    expected = (_expected("minutely", 60, True) + _expected("every-20s", 20, True)
                + _expected("skip-30s", 30, False))  # fmt: skip
    fired = sorted(created[0] + created[1] + created[2])
    assert fired == sorted(expected)  # no fire time twice, none missing
    assert sum(1 for ids in created if ids) >= 1
    queue = apps[0].queue(queue_name)
    assert queue.counts()["waiting"] == len(expected)
    job = queue.get_job(f"cron:every-20s:{(T0 + 20) * 1000}")
    assert job is not None and job.task == "report"
    assert job.payload == {"kwargs": {"kind": "e", "verbose": True}}
    assert job.time_limit == 90  # the task's time limit goes with its periodic jobs
    for app in apps:
        app.close()


def test_a_stale_scheduler_cannot_fire_a_time_again_once_its_job_is_gone(redis_url, queue_name):
    app = _app(redis_url, queue_name)
    scheduler, queue, spec = Scheduler(app), app.queue(queue_name), app.schedules["every-20s"]
    scheduler.tick(now=T0)
    stale = (T0 + 20) * 1000  # what a slow competitor read before the fire below
    job_id = spec.job_id(stale)
    assert job_id in scheduler.tick(now=T0 + 21)
    queue.client.delete(queue.core.keys.job(job_id))  # completed and dropped by retention
    queue.client.lrem(queue.core.keys.waiting, 0, job_id)
    assert queue._run(fire_call(queue.core, spec, stale, stale + 20_000, stale)) == 0
    assert queue.get_job(job_id) is None and queue.counts()["waiting"] == 0
    app.close()


def test_fired_jobs_keep_their_task_priority_and_limit(redis_url, queue_name):
    """A fired job is enqueued like task.enqueue(): at its task's priority level, under its limit
    (before, fire.lua pushed every fired job to level 0 without a limit)."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task(priority=5, limit=Limit("one-at-a-time", concurrency=1))
    def urgent() -> None:
        pass

    @app.task
    def plain() -> None:
        pass

    app.periodic("urgent", urgent, every=20)
    scheduler, queue = Scheduler(app), app.queue(queue_name)
    scheduler.tick(now=T0)
    first = scheduler.tick(now=T0 + 21)
    plain.enqueue()  # level 0, enqueued between the two fires
    second = scheduler.tick(now=T0 + 41)
    assert [queue.get_job(i).priority for i in first + second] == [5, 5]
    claimed = queue.claim(count=3)
    # level 5 first; its second fired job is parked behind the key's one running job
    assert [j.id for j in claimed] == [*first, claimed[1].id] and claimed[1].task == "plain"
    assert queue.counts()["waiting"] == 1
    queue.ack(claimed[0])  # frees the key's slot: the parked fired job is released
    assert [j.id for j in queue.claim(count=3)] == second
    app.close()


def test_a_worker_runs_the_scheduler(redis_url, queue_name):
    app = Conveyor(redis_url, default_queue=queue_name)
    ran: list[str] = []

    @app.task
    def tick(label: str) -> None:
        ran.append(label)

    app.periodic("fast", tick, every=0.5, args=("fast",))
    runner = Runner(app, [queue_name], scheduler=True, concurrency=2)
    thread = threading.Thread(target=runner.run)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(ran) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        runner.stop()
        thread.join(timeout=60)
    assert len(ran) >= 2 and not thread.is_alive()
    app.close()


EVERY = "every must be a number of seconds from 0.001 to 1e\\+09, got "


def test_bad_schedules_are_refused_naming_the_value(redis_url, queue_name):
    app = _app(redis_url, queue_name)
    report = app.get_task("report")
    cases = [
        ({"cron": "61 * * * *"}, ValueError, "invalid cron expression '61 \\* \\* \\* \\*'"),
        ({"cron": "every day"}, ValueError, "invalid cron expression 'every day'"),
        ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, ValueError, "unknown time zone 'Mars/Olympus'"),
        ({"every": 5, "tz": "../etc/passwd"}, ValueError, "unknown time zone '../etc/passwd'"),
        ({}, ValueError, "give exactly one of cron= or every="),
        ({"every": 0}, ValueError, EVERY + "0"),
        ({"every": 5, "missed": "all"}, ValueError, "missed must be one of"),
        ({"every": 5, "args": ()}, TypeError, "task 'report'.*missing a required argument: 'kind'"),
        ({"every": float("inf")}, ValueError, EVERY + "inf"),
        ({"every": True}, ValueError, EVERY + "True"),
        ({"every": 5, "args": ({1, 2},)}, Exception, "schedule 'x'.*cannot be serialized"),
        # accepted before, then skipped at every tick (its step overflowed to inf ms)
        ({"every": 1e306}, ValueError, EVERY + "1e\\+306"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            app.periodic("x", report, **{"args": ("k",), **options})
    # a name whose fires' job ids 'cron:<name>:<ms>' pass the id limit: accepted before, never fired
    with pytest.raises(ValueError, match="schedule name is 190 characters long; the limit is 174"):
        app.periodic("n" * 190, report, every=5, args=("k",))
    app.periodic("n" * 174, report, every=5, args=("k",))
    with pytest.raises(UnknownTaskError, match="unknown task 'nope'"):
        app.periodic("x", "nope", every=5)
    with pytest.raises(ValueError, match="schedule 'minutely' is already registered"):
        app.periodic("minutely", report, every=5, args=("k",))
    assert "x" not in app.schedules and "n" * 190 not in app.schedules


GRACE = "schedule 'x': grace must be a finite number of seconds >= 0, got "


@pytest.mark.parametrize(("grace", "message"), [
    ("5", GRACE + "'5'"),  # a TypeError from the comparison before ("'>=' not supported ...")
    (True, GRACE + "True"),  # accepted before: a bool is an int
    (None, GRACE + "None"),
    (-1, GRACE + "-1"),
    (math.nan, GRACE + "nan"),
    (math.inf, GRACE + "inf"),
    (1e300, "schedule 'x': grace must be at most 1e\\+09 s, got 1e\\+300"),
])
def test_a_grace_that_is_not_a_number_of_seconds_is_refused_naming_it(redis_url, queue_name, grace, message):
    app = _app(redis_url, queue_name)
    with pytest.raises(ValueError, match=message):
        app.periodic("x", "report", every=5, missed="skip", grace=grace, args=("k",))
    with pytest.raises(ValueError, match=message):
        Schedule("x", "t", "q", every=5, missed="skip", grace=grace)
    assert "x" not in app.schedules
    app.periodic("x", "report", every=5, missed="skip", grace=0, args=("k",))
    Schedule("y", "t", "q", every=5, grace=2.5)
    app.close()


@pytest.mark.parametrize(("options", "message"), [
    ({"max_attempts": 0}, "max_attempts must be an int >= 1, got 0"),
    ({"max_attempts": True}, "max_attempts must be an int >= 1, got True"),
    ({"max_attempts": "3"}, "max_attempts must be an int >= 1, got '3'"),
    ({"time_limit": 0}, "time_limit must be None or a finite number of seconds > 0, got 0"),
    ({"time_limit": "9"}, "time_limit must be None or a finite number of seconds > 0, got '9'"),
    ({"priority": 10}, "priority must be an int in 0..9"),
    ({"priority": True}, "priority must be an int in 0..9"),
])
def test_a_schedule_built_directly_checks_its_job_options(options, message):
    """Accepted before, then refused at every fire (the scheduler's tick packs the job)."""
    with pytest.raises(ValueError, match=f"schedule 'x': {message}"):
        Schedule("x", "t", "q", every=5, **options)


@pytest.mark.parametrize(("now", "fire"), [
    (datetime(2026, 1, 10, 12, 0, tzinfo=UTC), datetime(2026, 1, 11, 2, 0, tzinfo=UTC)),  # CET
    (datetime(2026, 7, 10, 12, 0, tzinfo=UTC), datetime(2026, 7, 11, 1, 0, tzinfo=UTC)),  # CEST
])
def test_cron_fire_times_follow_the_time_zone(now, fire):
    spec = Schedule("nightly", "t", "q", cron="0 3 * * *", tz="Europe/Paris")
    ms = int(now.timestamp() * 1000)
    assert spec.next_after(ms) == int(fire.timestamp() * 1000)
    assert spec.latest_at_or_before(int(fire.timestamp() * 1000)) == int(fire.timestamp() * 1000)
    assert spec.latest_at_or_before(int(fire.timestamp() * 1000) - 1) < ms


def test_app_scheduler_and_job_listing_run_under_the_acl_rules(server, queue_name):
    if server.family == "dragonfly":
        pytest.skip("dragonfly: ACL rules are checked on Redis and Valkey")
    name, password = f"cv-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", *acl_rules().split())
    app = _app(f"redis://{name}:{password}@{server.host}:{server.port}/0", queue_name)
    scheduler = Scheduler(app)
    scheduler.tick(now=T0)
    assert len(scheduler.tick(now=T0 + 61)) == 3  # one job per schedule: its latest fire time
    Runner(app, [queue_name], burst=True).run()
    assert app.queue(queue_name).counts()["total_completed"] == 3
    for state in ("waiting", "failed", "delayed"):  # LRANGE, ZREVRANGE, ZRANGE under the rules
        assert app.queue(queue_name).jobs(state, 0, 10) == []
    app.close()


def test_a_schedule_failing_at_a_tick_is_logged_by_name_and_the_others_still_fire(redis_url, queue_name,
                                                                                  caplog):
    """A schedule whose job cannot be built (here an infinite period: its next fire time overflows)
    is skipped with an error naming it; before, it aborted the tick, so every schedule after it
    never fired."""
    app = _app(redis_url, queue_name)
    broken = app.schedules["minutely"]
    object.__setattr__(broken, "every", float("inf"))  # as registered before every was checked
    object.__setattr__(broken, "cron", None)
    scheduler = Scheduler(app)
    scheduler.tick(now=T0)
    with caplog.at_level("ERROR", logger="conveyor.scheduler"):
        created = scheduler.tick(now=T0 + 40)
    assert "cron:every-20s:" in " ".join(created)
    assert any("schedule 'minutely'" in r.getMessage() for r in caplog.records)
    app.close()


def _tick_each_minute(app: Conveyor, queue_name: str, start: int, hours: int) -> list[str]:
    """One scheduler ticking each minute for ``hours``; each job is done at once (keep_completed=0:
    its record goes), so a fire time enqueued again would be created again."""
    scheduler, queue = Scheduler(app), app.queue(queue_name)
    scheduler.tick(now=start)
    created: list[str] = []
    for now in range(start + 60, start + hours * 3600, 60):
        created += scheduler.tick(now=now)
        for job in queue.claim(count=10):
            queue.ack(job)
    return created


def test_a_cron_schedule_fires_each_time_once_across_the_autumn_dst_change(redis_url, queue_name):
    """Europe/Paris falls back on 2026-10-25 at 01:00 UTC (03:00 CEST -> 02:00 CET). During the
    repeated hour the latest fire time was computed in the first occurrence of the hour (adding a
    second to a local time dropped its fold): the fires at 01:00 and 01:30 UTC were never enqueued,
    and those at 00:00 and 00:30 UTC ran a second time once their first job was done and gone."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task
    def report() -> None:
        pass

    app.periodic("half-hourly", report, cron="*/30 * * * *", tz="Europe/Paris")
    start = int(datetime(2026, 10, 24, 23, 10, tzinfo=UTC).timestamp())
    created = _tick_each_minute(app, queue_name, start, hours=4)
    expected = [f"cron:half-hourly:{(start + 20 * 60 + 1800 * i) * 1000}" for i in range(8)]
    assert created == expected  # 23:30 to 03:00 UTC: each half hour once, none twice
    app.close()


def test_a_fixed_time_cron_schedule_fires_once_in_the_repeated_autumn_hour(redis_url, queue_name):
    """Europe/Paris repeats 02:00-03:00 on 2026-10-25. A daily '30 2 * * *' ran twice that night, at
    00:30 and 01:30 UTC (croniter yields both occurrences of 02:30). As cron does, a schedule that
    names its minute and hour fires once, at the first occurrence; one with '*' in the minute or
    hour field ('*/20 2 * * *') fires at every matching instant, as the half-hourly one above."""
    app = Conveyor(redis_url, default_queue=queue_name)
    app.task(lambda: None, name="report")
    app.periodic("daily", "report", cron="30 2 * * *", tz="Europe/Paris")
    app.periodic("early", "report", cron="*/20 2 * * *", tz="Europe/Paris")
    start = int(datetime(2026, 10, 24, 22, 0, tzinfo=UTC).timestamp())
    created = _tick_each_minute(app, queue_name, start, hours=28)

    def utc(name: str) -> list[str]:
        stamps = [int(i.rsplit(":", 1)[1]) // 1000 for i in created if i.startswith(f"cron:{name}:")]
        return [datetime.fromtimestamp(s, UTC).strftime("%d %H:%M") for s in stamps]
    assert utc("daily") == ["25 00:30", "26 01:30"]
    both = ["25 00:00", "25 00:20", "25 00:40", "25 01:00", "25 01:20", "25 01:40"]
    assert utc("early") == [*both, "26 01:00", "26 01:20", "26 01:40"]
    app.close()


def test_cron_expressions_that_never_fire_or_fire_at_random_times_are_refused(redis_url, queue_name):
    """Accepted before: a date that never comes ('0 0 30 2 *') then failed at every tick of every
    scheduler, logged once a second forever, and never fired; a random field ('R') gave each
    process (each call) other fire times, so schedulers fired at times no other agreed on."""
    app = _app(redis_url, queue_name)
    cases = [
        ("0 0 30 2 *", "never matches"),
        ("0 0 31 4,6,9,11 *", "never matches"),
        ("R * * * *", "random"),
        ("0 r(0-5) * * *", "random"),
        ("0 0 * * * R/10", "random"),
        ("0 0 1 1 * 0 2020", "never matches"),  # a year field: its only date is past
    ]
    for expression, reason in cases:
        message = f"invalid cron expression {re.escape(repr(expression))}.*{reason}"
        with pytest.raises(ValueError, match=message):
            app.periodic("x", "report", cron=expression, args=("k",))
    assert "x" not in app.schedules
    # still accepted: a date that comes every four years, month and day names, 'L', '#'
    for i, expression in enumerate(["0 0 29 2 *", "0 0 * MAR,APR FRI", "0 0 L * *", "0 0 * * 5#3"]):
        app.periodic(f"ok-{i}", "report", cron=expression, args=("k",))
    app.close()


def test_a_schedule_redefined_after_a_fire_does_not_fire_that_time_again(redis_url, queue_name):
    """A deployment changes a schedule's period. Its stored next fire time came from the old
    definition; once it was due, the new definition's latest fire time, older than that stored
    time, was enqueued: here the 03:00 fire, already run under the old definition, ran again."""
    t0 = int(datetime(2026, 6, 1, 3, 0, tzinfo=UTC).timestamp())
    old, new = Conveyor(redis_url, default_queue=queue_name), Conveyor(redis_url, default_queue=queue_name)
    for app in (old, new):
        app.task(lambda: None, name="report")
    old.periodic("report", "report", every=60)
    new.periodic("report", "report", cron="0 3 * * *")
    queue = old.queue(queue_name)
    Scheduler(old).tick(now=t0 - 30)
    assert Scheduler(old).tick(now=t0 + 30) == [f"cron:report:{t0 * 1000}"]
    for job in queue.claim(count=10):  # done, and (keep_completed=0) its record is gone
        queue.ack(job)
    assert Scheduler(new).tick(now=t0 + 90) == []  # the 03:00 fire already ran
    assert Scheduler(new).tick(now=t0 + 86400 + 5) == [f"cron:report:{(t0 + 86400) * 1000}"]
    old.close()
    new.close()


def _report_app(redis_url: str, queue_name: str, **when: object) -> Conveyor:
    app = Conveyor(redis_url, default_queue=queue_name)
    app.task(lambda: None, name="report")
    app.periodic("report", "report", **when)
    return app


def _tick_and_finish(app: Conveyor, queue_name: str, now: float) -> list[str]:
    """One tick; the jobs it created are done and gone at once (keep_completed=0), so a fire time
    enqueued again would be created again."""
    created = Scheduler(app).tick(now=now)
    queue = app.queue(queue_name)
    for job in queue.claim(count=10):
        queue.ack(job)
    return created


def test_a_redefined_schedule_takes_effect_from_the_new_definitions_next_fire_time(redis_url, queue_name):
    """A deployment changes a daily schedule to every 60 s: its stored next fire time, the old
    definition's next 03:00, was kept, and the new definition fired nothing until then."""
    t0 = int(datetime(2026, 6, 1, 10, 0, tzinfo=UTC).timestamp())
    old = _report_app(redis_url, queue_name, cron="0 3 * * *")
    new = _report_app(redis_url, queue_name, every=60)
    assert Scheduler(old).tick(now=t0 + 10) == []  # stores tomorrow's 03:00
    assert Scheduler(new).tick(now=t0 + 20) == []  # the new definition's next fire time: 10:01
    assert Scheduler(new).tick(now=t0 + 61) == [f"cron:report:{(t0 + 60) * 1000}"]
    assert Scheduler(new).tick(now=t0 + 121) == [f"cron:report:{(t0 + 120) * 1000}"]
    old.close()
    new.close()


@pytest.mark.parametrize("old_ticks_first", [True, False])
@pytest.mark.parametrize(
    "old_when", [{"cron": "0 3 * * *"}, {"every": 60}], ids=["daily-to-60s", "60s-to-daily"]
)
def test_old_and_new_schedulers_of_a_redefined_schedule_fire_each_time_once(
    redis_url, queue_name, old_when, old_ticks_first
):
    """A rolling deploy: old and new definitions tick together for ten minutes across 03:00, then
    the old ones stop. Each fire time of either is enqueued once (the stored time never flips back
    to one that fired), the old definition's due times are left to it, and then the new one fires
    alone."""
    t0 = int(datetime(2026, 6, 1, 2, 55, tzinfo=UTC).timestamp())
    new_when = {"every": 60} if "cron" in old_when else {"cron": "0 3 * * *"}
    old = _report_app(redis_url, queue_name, **old_when)
    new = _report_app(redis_url, queue_name, **new_when)
    Scheduler(old).tick(now=t0 - 0.9)  # the old definition ran before the deploy
    created: list[str] = []
    for second in range(900):
        ticking = [old, new] if second < 600 else [new]  # the old schedulers stop after 10 min
        if not old_ticks_first:
            ticking.reverse()
        for app, offset in zip(ticking, (0.1, 0.5), strict=False):
            created += _tick_and_finish(app, queue_name, t0 + second + offset)
    minutes = [f"cron:report:{(t0 + m) * 1000}" for m in range(0, 900, 60)]
    if "cron" in old_when:  # new every 60 s: each minute from its first fire time on
        assert created == minutes[1:]
    else:  # the old every 60 s fired until it stopped, then the new daily waits for tomorrow
        assert created == minutes[:10]
        tomorrow = t0 + 300 + 86400  # 03:00
        assert Scheduler(new).tick(now=tomorrow + 5) == [f"cron:report:{tomorrow * 1000}"]
    old.close()
    new.close()


def test_a_scheduler_with_a_late_clock_never_moves_a_redefined_schedule_back_to_a_fired_time(
    redis_url, queue_name
):
    """A new definition moves a stored time earlier, but never to one at or before the floor,
    the time up to which fires were handled: here a scheduler whose clock is 10 ms late would have
    moved it back to the minute the other definition had just fired, and fired it again."""
    t0 = T0 + 600
    old = _report_app(redis_url, queue_name, every=60)
    new = _report_app(redis_url, queue_name, every=30)
    Scheduler(old).tick(now=t0 - 30)
    assert _tick_and_finish(old, queue_name, t0 + 0.5) == [f"cron:report:{t0 * 1000}"]
    assert _tick_and_finish(new, queue_name, t0 - 0.01) == []  # moved to t0 + 30, not to t0
    assert _tick_and_finish(new, queue_name, t0 + 1) == []
    assert _tick_and_finish(new, queue_name, t0 + 31) == [f"cron:report:{(t0 + 30) * 1000}"]
    old.close()
    new.close()


def test_a_next_fire_time_stored_without_a_mark_is_read_and_kept_until_due(redis_url, queue_name):
    """A plain next fire time (stored by an earlier version, which writes no mark, or with a mark
    left from another time) names no definition: it is kept until due, then fired as before."""
    t0 = int(datetime(2026, 6, 1, 10, 0, tzinfo=UTC).timestamp())
    new = _report_app(redis_url, queue_name, every=60)
    queue = new.queue(queue_name)
    tomorrow = (t0 + 17 * 3600) * 1000  # 03:00
    queue.client.hset(queue.core.keys.schedules, "report", str(tomorrow))
    queue.client.hset(queue.core.keys.schedules, "report{", f"0123456789ab:{tomorrow - 1}:0")  # stale
    assert Scheduler(new).tick(now=t0 + 5) == []
    assert int(queue.client.hget(queue.core.keys.schedules, "report")) == tomorrow
    assert Scheduler(new).tick(now=tomorrow / 1000 + 1) == [f"cron:report:{tomorrow}"]
    new.close()


def test_fire_compares_the_mark_with_the_next_fire_time(redis_url, queue_name):
    """A stale scheduler that read the same next fire time but another mark (the schedule moved
    away and back since) changes nothing."""
    app = _report_app(redis_url, queue_name, every=60)
    queue, spec = app.queue(queue_name), app.schedules["report"]
    Scheduler(app).tick(now=T0 + 1)
    stored = (T0 + 60) * 1000
    mark = queue.client.hget(queue.core.keys.schedules, "report{").decode()
    assert mark == f"{spec.fingerprint()}:{stored}:{(T0 + 1) * 1000}"
    call = fire_call(queue.core, spec, stored, stored + 60_000, stored, mark="other:1:0", new_mark="x:1:0")
    assert queue._run(call) == 0
    assert queue.client.hget(queue.core.keys.schedules, "report{").decode() == mark
    app.close()
