"""Audit of cron, the Runner and the CLI: each test failed before its fix"""

from __future__ import annotations

import itertools
import threading
import time

from conveyor import Conveyor
from conveyor._scheduler import Scheduler


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
    scheduler = Scheduler(app)
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    time.sleep(3.0)
    scheduler.stop()
    thread.join(timeout=10)
    queue = app.queue(queue_name)
    fired = sorted(int(job.id.rsplit(":", 1)[1]) for job in queue.jobs("waiting", 0, 100))
    assert len(fired) >= 10, fired
    assert {later - earlier for earlier, later in itertools.pairwise(fired)} == {200}, fired
    app.close()
