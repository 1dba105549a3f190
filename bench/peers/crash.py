"""The crash table: what each library loses when a worker dies, the server restarts or the
network drops, with jobs in flight.

Per library (at its documented recovery settings, stated in the result file) and fault:
``N`` jobs whose handler sleeps ``SLEEP`` s are enqueued, a worker at concurrency ``C`` starts,
and once a quarter are done the fault strikes:

- ``sigkill``: the worker's process group gets SIGKILL; a fresh worker starts at once (as a
  supervisor would restart it);
- ``server-restart``: the server (AOF everysec) is stopped gracefully and started again on
  the same port and data; the worker must reconnect;
- ``connection-cut``: the worker talks through a proxy that drops every connection and
  refuses new ones for ``CUT_S`` seconds.

Then we wait for every job, up to ``limit_s`` after the fault, and give up earlier once no
job has completed for ``idle_s``: four times the 5 s recovery timeouts set for every library,
and 5 s more than the slowest documented recovery at those settings (arq re-queues a job once
its in-progress key expires, ``job_timeout`` + 10 s = 15 s). Reported: jobs lost (not run and no
longer anywhere on the server), run twice (completed more than once), stuck (not run but still
stored on the server), and seconds from the fault until all were done (None: never, within
the limits).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from bench.peers.drive import Child, ChildFailed, count_lines, read_log
from bench.peers.measure import ids
from bench.peers.proxy import CuttableProxy

FAULTS = ("sigkill", "server-restart", "connection-cut")
SIZES = {"full": {"jobs": 200, "limit_s": 60.0, "idle_s": 20.0},
         "quick": {"jobs": 100, "limit_s": 40.0, "idle_s": 20.0}}
SLEEP, CONCURRENCY, CUT_S = 0.05, 10, 3.0


def where_stored(url: str, missing: set[str]) -> set[str]:
    """Which of ``missing`` job ids still appear anywhere in the server's data."""
    if not missing:
        return set()
    client = redis.Redis.from_url(url)
    blobs: list[bytes] = []
    try:
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            if kind == b"string":
                blobs.append(client.get(key) or b"")
            elif kind == b"list":
                blobs += client.lrange(key, 0, -1)
            elif kind == b"hash":
                blobs += client.hvals(key)
            elif kind == b"zset":
                blobs += client.zrange(key, 0, -1)
            elif kind == b"set":
                blobs += list(client.smembers(key))
            elif kind == b"stream":
                blobs += [v for _, fields in client.xrange(key) for v in fields.values()]
    finally:
        client.close()
    text = b"\n".join(b for b in blobs if isinstance(b, bytes))
    return {j for j in missing if j.encode() in text}


def run_fault(fault: str, make_child: Callable[[str], Child], server: Any,
              sizes: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One library, one fault; returns the crash-table record."""
    n, limit, idle = sizes["jobs"], sizes["limit_s"], sizes["idle_s"]
    proxy = CuttableProxy(server.host, server.port) if fault == "connection-cut" else None
    worker_url = proxy.url if proxy else server.url
    child = make_child(server.url)
    wchild = make_child(worker_url)
    job_ids = ids(n)
    log = child.tmp / f"crash-{fault}-{job_ids[0]}.log"
    workers = []
    record: dict[str, Any] = {"fault": fault, "jobs": n, "limit_s": limit, "idle_s": idle,
                              "sleep_s": SLEEP, "concurrency": CONCURRENCY}
    try:
        child.call("fill", timeout, ids=job_ids)
        workers.append(wchild.start_worker(CONCURRENCY, log, sleep=SLEEP))
        deadline = time.monotonic() + timeout
        while count_lines(log) < n // 4:
            if time.monotonic() > deadline or not workers[0].alive():
                raise ChildFailed("worker made no progress before the fault"
                                  + ("" if workers[0].alive() else f": {workers[0].error()}"))
            time.sleep(0.01)
        struck = time.time()
        if fault == "sigkill":
            workers[0].kill()
            workers.append(wchild.start_worker(CONCURRENCY, log, sleep=SLEEP))
        elif fault == "server-restart":
            server.restart()
        else:
            assert proxy is not None
            proxy.cut(CUT_S)
        done_at = _wait_all(log, set(job_ids), struck + limit, idle)
        record["worker_alive"] = workers[-1].alive()
    except ChildFailed as exc:
        return {**record, "status": "failed", "error": str(exc)}
    finally:
        for w in workers:
            w.kill()
        if proxy:
            proxy.close()
    seen = Counter(j for j, _ in read_log(log))
    missing = {j for j in job_ids if not seen[j]}
    stuck = where_stored(server.url, missing)
    return {**record, "status": "ok", "lost": len(missing - stuck), "stuck": len(stuck),
            "run_twice": sum(1 for j in job_ids if seen[j] > 1),
            "seconds_to_done": None if done_at is None else round(done_at - struck, 2)}


def _wait_all(log: Any, want: set[str], until: float, idle: float) -> float | None:
    """Wall time when every job in ``want`` had completed at least once, or None (the limit
    passed, or no job completed for ``idle`` seconds)."""
    seen, progressed = -1, time.time()
    while time.time() < until:
        lines = count_lines(log)
        if lines != seen:
            seen, progressed = lines, time.time()
        if lines >= len(want) and want <= {j for j, _ in read_log(log)}:
            return time.time()
        if time.time() - progressed >= idle:
            return None
        time.sleep(0.1)
    return None
