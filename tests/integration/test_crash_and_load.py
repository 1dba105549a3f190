"""Slow tests, once per server: a worker process killed mid-job, and 20,000 jobs through 4 workers.

Worker processes run tests/integration/_proc_worker.py with PYTHONPATH set from this file's
location (the repository root), so the tests work from any checkout.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conveyor import Queue, Worker

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "_proc_worker.py"


def _spawn(mode: str, url: str, name: str, out: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "queue"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    )
    return subprocess.Popen([sys.executable, str(SCRIPT), mode, url, name, str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait(predicate, timeout: float, what: str, procs=()) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in procs:
            if p.poll() is not None:
                output = p.stdout.read().decode(errors="replace") if p.stdout else ""
                raise AssertionError(f"worker process exited ({p.returncode}) while waiting for "
                                     f"{what}:\n{output[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def _kill(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(10)
        if p.stdout:
            p.stdout.close()


def _waiters(admin, name: str) -> int:
    return sum(1 for c in admin.client_list() if c.get("name") == f"conveyor:{name}:waiter")


def _drop(admin, name: str) -> None:
    keys = list(admin.scan_iter(match=f"cv:{{{name}}}:*", count=5000))
    for i in range(0, len(keys), 1000):
        admin.unlink(*keys[i : i + 1000])


@pytest.mark.slow
def test_sigkill_mid_job_loses_nothing(server, queue_name, tmp_path):
    admin = server.client()
    q = Queue.from_url(server.url, queue_name, lease=1.0, keep_completed=-1, maintenance_interval=0.2)
    jobs = q.enqueue_many([("crash", i) for i in range(5)])
    ids = {j.id for j in jobs}
    started_file = tmp_path / "started"
    victim = _spawn("crash", server.url, queue_name, started_file)
    try:
        _wait(lambda: started_file.exists() and started_file.read_text().strip(), 30,
              "the doomed worker to start a job", [victim])
        held = q.counts()["active"]
        assert held >= 1
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed_at = time.monotonic()
    finally:
        _kill([victim])
    started = started_file.read_text().split()
    assert set(started) <= ids

    ran: list[str] = []
    rescuer = Worker(q, {"crash": lambda job: ran.append(job.id)}, concurrency=2,
                     install_signal_handlers=False)
    thread = threading.Thread(target=rescuer.run, daemon=True)
    thread.start()
    try:
        _wait(lambda: q.counts()["total_completed"] >= 5, 20, "the rescuer to finish every job")
        recovered_after = time.monotonic() - killed_at
    finally:
        rescuer.stop()
        admin.zadd(q.core.keys.marker, {"test-stop": 0})
        thread.join(10)
    assert not thread.is_alive()

    counter = collections.Counter(ran)
    assert set(counter) == ids  # nothing lost
    assert max(counter.values()) == 1  # each job ran once in the rescuer
    assert q.counts() == {"waiting": 0, "delayed": 0, "active": 0, "completed": 5, "failed": 0,
                          "cancelled": 0, "total_completed": 5, "total_failed": 0}
    completed = {m.decode() for m in admin.zrange(q.core.keys.completed, 0, -1)}
    assert completed == ids  # each acknowledged exactly once: 5 acks, 5 distinct ids
    for job_id in started:
        stored = q.get_job(job_id)
        assert (stored.state, stored.attempts) == ("completed", 2)  # the killed attempt counted
    assert recovered_after < 10
    q.close()
    _drop(admin, queue_name)
    admin.close()


@pytest.mark.slow
def test_20k_jobs_through_4_workers_in_2_processes(server, queue_name, tmp_path):
    total = 20_000
    admin = server.client()
    q = Queue.from_url(server.url, queue_name, keep_completed=-1)
    outs = [tmp_path / f"proc-{i}.txt" for i in range(2)]
    procs = [_spawn("load", server.url, queue_name, out) for out in outs]
    try:
        _wait(lambda: _waiters(admin, queue_name) == 4, 30, "4 idle workers", procs)
        enqueued: list[str] = []
        for start in range(0, total, 1000):
            batch = q.enqueue_many([("load", n) for n in range(start, start + 1000)])
            enqueued += [j.id for j in batch]
        assert len(set(enqueued)) == total
        _wait(lambda: q.counts()["total_completed"] >= total, 240, f"{total} acks", procs)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(60) == 0, p.stdout.read().decode(errors="replace")[-3000:]
    finally:
        _kill(procs)

    per_worker: collections.Counter[str] = collections.Counter()
    processed: collections.Counter[str] = collections.Counter()
    for i, out in enumerate(outs):
        for line in out.read_text().splitlines():
            label, job_id = line.split()
            per_worker[f"{i}-{label}"] += 1
            processed[job_id] += 1
    duplicates = {k: v for k, v in processed.items() if v > 1}
    assert not duplicates, f"{len(duplicates)} jobs ran more than once"
    assert set(processed) == set(enqueued), "some jobs never ran"
    assert sum(per_worker.values()) == total
    assert sorted(per_worker) == ["0-async", "0-sync", "1-async", "1-sync"], per_worker
    assert q.counts() == {"waiting": 0, "delayed": 0, "active": 0, "completed": total,
                          "failed": 0, "cancelled": 0, "total_completed": total, "total_failed": 0}
    acked = {m.decode() for m in admin.zrange(q.core.keys.completed, 0, -1)}
    assert acked == set(enqueued)
    q.close()
    _drop(admin, queue_name)
    admin.close()
