"""Audit of cron, the Runner and the CLI: each test failed before its fix"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
from conveyor import Conveyor, UnknownTaskError
from conveyor._runner import Runner
from conveyor._schedule import Schedule
from conveyor._scheduler import Scheduler

T0 = 1_800_000_000  # a multiple of 20 seconds


def _run_scheduler(app: Conveyor, seconds: float) -> None:
    scheduler = Scheduler(app)
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    time.sleep(seconds)
    scheduler.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_running_scheduler_enqueues_every_fire_time_of_a_schedule_faster_than_its_tick(
    redis_url, queue_name
):
    """The scheduler ticked once a second whatever its schedules: of an every=0.2 schedule it fired
    only the latest time at each tick (missed="once", as after an outage), so 4 fires in 5 were
    lost while it ran (3 s gave 2 jobs); an every=1 schedule lost one whenever a tick, a little
    over a second after the last, passed two fire times. It now wakes at the next fire time."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task
    def beat() -> None:
        pass

    app.periodic("fast", beat, every=0.2)
    _run_scheduler(app, 3.0)
    queue = app.queue(queue_name)
    fired = sorted(int(job.id.rsplit(":", 1)[1]) for job in queue.jobs("waiting", 0, 100))
    assert len(fired) >= 10, fired
    assert {later - earlier for earlier, later in itertools.pairwise(fired)} == {200}, fired
    app.close()


def test_a_running_scheduler_fires_a_skip_schedule_with_a_small_grace(redis_url, queue_name):
    """missed="skip" drops fire times missed by more than grace seconds (an outage), but a running
    scheduler always sees a fire time a little after it: a round trip, and up to a tick (1 s)
    before. So grace=0, accepted, dropped every fire time of a running scheduler (no job in 3 s of
    an every=0.5 schedule), and grace=0.5 about half of them. A tick's lateness is now allowed."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task
    def beat() -> None:
        pass

    app.periodic("strict", beat, every=0.5, missed="skip", grace=0)
    _run_scheduler(app, 3.0)
    assert app.queue(queue_name).counts()["waiting"] >= 4
    # a fire time missed by more than grace and a tick's lateness is still dropped
    schedule = Schedule("s", "t", "q", every=5, missed="skip", grace=0)
    assert schedule.decide(5_000, 11_001, schedule.fingerprint(), 1)[1] is None
    assert schedule.decide(5_000, 10_900, schedule.fingerprint(), 1)[1] == 10_000
    app.close()


def test_info_of_an_app_without_tasks_says_so(tmp_path):
    """``conveyor info`` of an app with no registered task (its tasks' module not imported, or the
    wrong attribute) printed an empty table and exited 0, so a wrong app path looked like empty
    queues; ``conveyor worker`` of the same app refuses it (exit 2)."""
    (tmp_path / "taskless.py").write_text(
        "from conveyor import Conveyor\napp = Conveyor('redis://127.0.0.1:1/0')\n"
    )
    command = [sys.executable, "-m", "conveyor", "info", "taskless:app", "--json"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and result.stdout == "", (result.stdout, result.stderr)
    assert result.stderr.startswith("conveyor: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "the app has no registered task (is its tasks' module imported?)" in result.stderr


def test_a_fired_job_keeps_its_tasks_delay(redis_url, queue_name):
    """A fired job is enqueued as task.enqueue() would (priority, limit, time limit), but the
    task's default delay was dropped silently: @app.task(delay=30) ran its periodic jobs at once."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task(delay=30, priority=3)
    def later() -> None:
        pass

    app.periodic("later", later, every=20)
    scheduler, queue = Scheduler(app), app.queue(queue_name)
    scheduler.tick(now=T0)
    [job_id] = scheduler.tick(now=T0 + 21)
    job = queue.get_job(job_id)
    assert job is not None and job.state == "delayed" and job.priority == 3, job
    [(delayed_id, due)] = queue.client.zrange(queue.core.keys.delayed, 0, -1, withscores=True)
    assert delayed_id.decode() == job_id and due - job.enqueued_at * 1000 == 30_000
    assert queue.counts()["waiting"] == 0 and queue.claim(count=1) == []
    app.close()


def test_a_schedule_of_a_task_another_app_registered_is_refused(redis_url, queue_name):
    """app.periodic() looked a task given by name up in the app, but took a Task object as it came:
    one of another app (or a module-level function's Task of a second Conveyor) was accepted, and
    every fired job then failed in this app's workers as an unknown task."""
    app, other = Conveyor(redis_url, default_queue=queue_name), Conveyor(redis_url, default_queue=queue_name)

    @other.task
    def elsewhere() -> None:
        pass

    with pytest.raises(UnknownTaskError, match="task 'elsewhere' is not registered in this app"):
        app.periodic("x", elsewhere, every=20)
    assert app.schedules == {}

    @app.task
    def here() -> None:
        pass

    app.periodic("y", here.with_options(priority=2), every=20)  # this app's task, other options
    app.close()
    other.close()


CRON_APP = """
import os
from conveyor import Conveyor, current_job

app = Conveyor(os.environ["TEST_URL"], default_queue=os.environ["TEST_QUEUE"])

@app.task
def beat() -> None:
    with open(os.environ["TEST_OUT"], "a") as out:
        out.write(current_job().id + "\\n")

app.periodic("beat", beat, every=0.5)
"""


def test_worker_processes_started_and_restarted_run_each_fire_time_once(redis_url, queue_name, tmp_path):
    """Three 'conveyor worker' processes with the scheduler, one of them restarted midway: each
    fire time of an every=0.5 schedule ran once, none twice and none left out. Before 6450540
    each process ticked once a second, so one fire time in two was never enqueued."""
    (tmp_path / "cronapp.py").write_text(CRON_APP)
    out = tmp_path / "out.txt"
    env = {**os.environ, "TEST_URL": redis_url, "TEST_QUEUE": queue_name, "TEST_OUT": str(out)}

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "conveyor", "worker", "cronapp:app", "-c", "4"],
                                cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip

    procs = [start() for _ in range(3)]
    try:
        time.sleep(3)
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(timeout=30) == 0
        procs.append(start())
        time.sleep(3)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=30) for proc in procs]
    assert codes == [0, 0, 0, 0], [proc.stderr.read() for proc in procs if proc.stderr]
    ran = [int(line.rsplit(":", 1)[1]) for line in out.read_text().split()]
    assert len(ran) == len(set(ran)) >= 8, sorted(ran)  # none twice
    fired = sorted(ran)
    assert {later - earlier for earlier, later in itertools.pairwise(fired)} == {500}, fired


def test_a_schedule_of_a_task_with_a_fixed_job_id_is_refused(redis_url, queue_name):
    """A fired job's id is 'cron:<name>:<fire time>'; a job_id given through with_options() was
    dropped silently (each fire got its own id), so refuse it by name instead."""
    app = Conveyor(redis_url, default_queue=queue_name)

    @app.task
    def once() -> None:
        pass

    with pytest.raises(ValueError, match="schedule 'x': a fired job's id is 'cron:x:<fire time in ms>'"):
        app.periodic("x", once.with_options(job_id="fixed"), every=20)
    assert app.schedules == {}
    app.close()


def test_a_scheduler_stuck_in_a_server_call_does_not_hold_up_the_runners_exit(redis_url, queue_name):
    """At the end of run() the Runner waited up to 10 s for its scheduler thread, past any
    shutdown timeout: a scheduler stuck in a server call (here writes paused, as in a failover)
    held the exit until its socket timed out, and a supervisor's grace period set from
    --shutdown-timeout ran out first. A fire call is atomic on the server, and the thread is a
    daemon: the Runner now waits for it only briefly."""
    app = Conveyor(redis_url, default_queue=queue_name, socket_timeout=6)

    @app.task
    def served() -> None:
        pass

    @app.task(queue=f"{queue_name}-elsewhere")  # fired, never claimed: the worker stays idle
    def beat() -> None:
        pass

    app.periodic("often", beat, every=0.02)
    runner = Runner(app, [queue_name], scheduler=True, concurrency=1, shutdown_timeout=1)
    thread = threading.Thread(target=runner.run)
    thread.start()
    admin = redis.Redis.from_url(redis_url)
    try:
        time.sleep(1.0)
        admin.client_pause(5000, all=False)  # writes wait: the scheduler's next fire call hangs
        time.sleep(0.5)
        started = time.monotonic()
        runner.stop()
        thread.join(timeout=15)
        took = time.monotonic() - started
    finally:
        admin.client_unpause()
        admin.close()
    assert not thread.is_alive()
    assert took < 2.5, f"run() returned {took:.1f} s after stop()"
    app.close()
