"""enqueue-single: one ``enqueue`` call per job, from 1 or many concurrent callers.

With ``callers`` 1, one synchronous ``Queue`` calls ``enqueue`` in a loop. With more, that many
asyncio tasks share one ``AsyncQueue`` (one pooled connection per caller), as concurrent request
handlers of a web application would. ``batching`` sets ``QueueSettings.batch_enqueue`` (concurrent
calls that pile up while one is in flight go out as one script call).
Calls go on until ``min_seconds`` have passed (``jobs`` records how many were sent).
Metrics: ``jobs_per_s``, ``jobs``; per-call latency ``p50_ms``, ``p99_ms``, ``max_ms``;
``client_cpu_us_per_job``: CPU time of the producer process over the timed calls, per job.
A lone caller (``callers`` 1) is bracketed by bare PINGs on the same client, one at a time, two
ways: ``client.ping()`` (redis-py's usual path, a pool checkout per call) and on one connection of
the pool held for the loop (the round-trip floor). Each way runs for a quarter of
``min_seconds`` just before the enqueue calls and a quarter just after, so a drift of the machine
hits both sides alike: ``ping_client_ops_per_s``, ``ping_held_ops_per_s``, and the enqueue's
jobs/s over each, ``vs_ping_client`` and ``vs_ping_held``. Where the difference goes:
``ping_held_client_cpu_us`` (this process's CPU per held PING) next to ``client_cpu_us_per_job``,
and ``server_script_us_per_call``, the server's own time per enqueue script call (the EVALSHA
``usec`` of ``INFO commandstats`` over the timed calls, read from a separate connection; absent
where the server does not report it). The cost of one plain write, against which an enqueue's
three writes can be read: a ``SET`` of the payload's JSON to one key on a held connection, for a
quarter of ``min_seconds`` after each bracket's PINGs, ``set_held_ops_per_s`` and
``set_held_vs_ping_held`` (its rate over the held PINGs'; absent for a client without a pool).
Params: ``min_seconds``, ``payload_bytes``, ``callers``, ``batching``, ``sweep_seconds``
(the ``min_seconds`` of the concurrent cases, 2 s like the lone one; the quick run shortens both).
Exactly-once here means stored once: after the clock stops, the waiting list must hold exactly the
returned ids, each once (``acked`` counts ids found in the waiting list).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from bench.scenarios._common import (
    ExactlyOnceViolation,
    Target,
    Variant,
    cpu_per_job,
    make_async_queue,
    make_queue,
    metric,
    payload_of,
    run_async,
    run_calls,
    run_for,
    server_info,
)
from bench.scenarios.reference import ping_of
from bench.stats import latency_summary

NAME = "enqueue-single"
SET_PROBE = "conveyor-bench:set-probe"  # the held SETs' key, deleted after them
NEEDS_CONVEYOR = True
HEADLINE = ("jobs_per_s",)
HEADLINE_CASE = {"metric": "jobs_per_s",
                 "params": {"payload_bytes": 64, "callers": 1, "batching": False},
                 "conditions": "one caller, one job per call, 64 B payload, RESP3, hiredis"}
DEFAULTS: dict[str, Any] = {"min_seconds": 2.0, "payload_bytes": 64, "callers": [1, 8, 32, 128],
                            "batching": [False, True], "sweep_seconds": 2.0}
QUICK: dict[str, Any] = {"min_seconds": 0.3, "payload_bytes": 64, "callers": [1, 32],
                         "batching": [False, True], "sweep_seconds": 0.3}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Every caller count with batching off and on, on the baseline of the server that runs the
    client-side variations (batching is client-side); one lone caller without batching
    elsewhere, except listpack (enqueue does not depend on hash encoding)."""
    if variant.config == "listpack-1024":
        return []
    callers, batching = _listed(options["callers"]), _listed(options["batching"])
    if not (variant.primary and variant.client_side):
        return [{**options, "callers": callers[0], "batching": batching[0]}]
    return [{**options, "callers": n, "batching": b,
             "min_seconds": options["sweep_seconds"] if n > 1 else options["min_seconds"]}
            for n in callers for b in batching]


def verify_stored(queue: Any, ids: list[str]) -> dict[str, Any]:
    """Check that the waiting list holds exactly ``ids``, each once."""
    raw = queue.client.lrange(queue.core.keys.waiting, 0, -1)
    stored = Counter(x.decode() if isinstance(x, bytes) else str(x) for x in raw)
    duplicates = sum(v - 1 for v in stored.values() if v > 1) + len(set(stored) - set(ids))
    lost = len(set(ids) - set(stored))
    report = {"enqueued": len(ids), "acked": sum(stored.values()), "duplicates": duplicates,
              "lost": lost, "ok": duplicates == 0 and lost == 0 and len(set(ids)) == len(ids)}
    if not report["ok"]:
        raise ExactlyOnceViolation(report)
    return report


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """Enqueue one job per call until ``min_seconds`` have passed."""
    if params.get("callers", 1) > 1:
        return run_async(target, run_concurrent(target, params))
    stats = target.redis()
    try:
        return one_at_a_time(make_queue(target, NAME, **_batching(params)), params, against_ping=True,
                             stats=stats)
    finally:
        stats.close()


def _batching(params: dict[str, Any]) -> dict[str, bool]:
    """The setting as the case says (on by default since it costs a lone caller nothing), or
    nothing for a version without it, so `compare --suite head` also drives older versions."""
    from conveyor import QueueSettings  # noqa: PLC0415 (deliberately lazy)

    wanted = bool(params.get("batching", False))
    if wanted or "batch_enqueue" in QueueSettings.__dataclass_fields__:
        return {"batch_enqueue": wanted}
    return {}


def one_at_a_time(queue: Any, params: dict[str, Any], against_ping: bool = False,
                  stats: Any = None) -> dict[str, Any]:
    """One caller enqueueing one job per call on ``queue`` for ``min_seconds`` (also used by
    the scale-out and tls scenarios on the topologies they start); ``against_ping``: bracketed
    by bare PINGs (see the module docstring); ``stats``: a client to read the server's script
    time from."""
    payload = payload_of(params["payload_bytes"])
    queue.cancel(queue.enqueue("noop", payload).id)  # connect, check server, load script
    quarter = params["min_seconds"] / 4
    before = ping_rates(queue.client, quarter, payload) if against_ping else {}
    scripts_before = script_time(stats)
    result = timed_calls(queue, params["min_seconds"], lambda: [queue.enqueue("noop", payload)],
                         close=False)
    calls, usec = (now - was for now, was in zip(script_time(stats), scripts_before, strict=True))
    if against_ping:
        after, rate = ping_rates(queue.client, quarter, payload), result["metrics"]["jobs_per_s"][0]
        for way in ("client", "held"):
            pings, seconds, _ = before[way]
            pings_per_s = (pings + after[way][0]) / (seconds + after[way][1])
            result["metrics"] |= {f"ping_{way}_ops_per_s": metric(pings_per_s, "1/s"),
                                  f"vs_ping_{way}": metric(rate / pings_per_s, "ratio")}
        held = [before["held"], after["held"]]
        result["metrics"]["ping_held_client_cpu_us"] = cpu_per_job(sum(h[2] for h in held),
                                                                   sum(h[0] for h in held))
        result["metrics"] |= set_metrics(before, after)
    if calls > 0:
        result["metrics"]["server_script_us_per_call"] = metric(usec / calls, "us")
    queue.close()
    return result


def script_time(stats: Any) -> tuple[int, int]:
    """The server's EVALSHA (calls, µs) so far, zeros without ``stats`` or where it reports none
    (their difference across the timed calls is theirs: nothing else sends scripts meanwhile)."""
    row = server_info(stats, "commandstats").get("cmdstat_evalsha") if stats is not None else None
    if not isinstance(row, dict):
        return 0, 0
    return int(row.get("calls", 0)), int(row.get("usec", 0))


def ping_rates(client: Any, seconds: float, payload: Any = None) -> dict[str, tuple[int, float, float]]:
    """(calls, seconds, process CPU seconds) of each way of sending bare PINGs, then of the held
    SETs of ``payload`` where the client has a pool (see the module docstring)."""
    ways = {"client": with_cpu(lambda: run_calls(seconds, ping_of(client))),
            "held": with_cpu(lambda: ping_held(client, seconds))}
    if getattr(client, "connection_pool", None) is not None:
        command = ("SET", SET_PROBE, json.dumps(payload))
        ways["set"] = with_cpu(lambda: held_calls(client, seconds, command))
        client.delete(SET_PROBE)
    return ways


def set_metrics(*brackets: dict[str, tuple[int, float, float]]) -> dict[str, Any]:
    """The held SETs' rate and its ratio to the held PINGs' over the same brackets; {} where no
    SET was sent."""
    if any("set" not in ways for ways in brackets):
        return {}
    sets, pings = ([ways[way] for ways in brackets] for way in ("set", "held"))
    rate = sum(s[0] for s in sets) / sum(s[1] for s in sets)
    ping_rate = sum(p[0] for p in pings) / sum(p[1] for p in pings)
    return {"set_held_ops_per_s": metric(rate, "1/s"),
            "set_held_vs_ping_held": metric(rate / ping_rate, "ratio")}


def with_cpu(measure: Callable[[], tuple[int, float]]) -> tuple[int, float, float]:
    """``measure()``'s (calls, seconds) and the process CPU seconds it took."""
    cpu = time.process_time()
    calls, seconds = measure()
    return calls, seconds, time.process_time() - cpu


def ping_held(client: Any, seconds: float) -> tuple[int, float]:
    """Bare PINGs one at a time for ``seconds`` on one connection of ``client``'s pool, held for
    the whole loop (no pool checkout per call): (PINGs, seconds). valkey-glide's client has one
    multiplexed connection and no pool: its ``ping`` is that already."""
    if getattr(client, "connection_pool", None) is None:
        return run_calls(seconds, ping_of(client))
    return held_calls(client, seconds, ("PING",))


def held_calls(client: Any, seconds: float, command: tuple[str, ...]) -> tuple[int, float]:
    """``command`` one at a time for ``seconds`` on one connection of ``client``'s pool, held for
    the whole loop: (calls, seconds)."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        return run_calls(seconds, lambda: (conn.send_command(*command), conn.read_response()))
    finally:
        pool.release(conn)


Timed = tuple[list[str], list[float], float, float]


def timed_calls(queue: Any, min_seconds: float, send: Callable[[], list[Any]],
                per_batch: bool = False, close: bool = True) -> dict[str, Any]:
    """Call ``send()`` (the jobs it enqueued) on a sync ``queue`` until ``min_seconds`` passed,
    timing each call; then check what is stored and (unless not ``close``) close the queue."""
    ids: list[str] = []
    lat: list[float] = []

    def one() -> int:
        t0 = time.perf_counter()
        ids.extend(job.id for job in send())
        lat.append(time.perf_counter() - t0)
        return 1

    cpu = time.process_time()
    _, elapsed = run_for(min_seconds, one)
    cpu = time.process_time() - cpu
    report = verify_stored(queue, ids)
    if close:
        queue.close()
    return outcome(ids, lat, elapsed, report, cpu, per_batch=per_batch)


async def timed_tasks(tasks: int, min_seconds: float,
                      send: Callable[[], Awaitable[list[Any]]]) -> Timed:
    """``tasks`` asyncio tasks calling ``send()`` until a shared deadline, each call timed:
    (ids, latencies, seconds until the last task returned, process CPU seconds)."""
    ids: list[str] = []
    lat: list[float] = []
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + min_seconds

    async def loop() -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            jobs = await send()
            lat.append(time.perf_counter() - t0)
            ids.extend(job.id for job in jobs)

    await asyncio.gather(*(loop() for _ in range(tasks)))
    return ids, lat, time.perf_counter() - start, time.process_time() - cpu


async def verify_async(target: Target, queue: Any, ids: list[str]) -> dict[str, Any]:
    """:func:`verify_stored` for an ``AsyncQueue`` (read back through a sync one), then close it."""
    sync = make_queue(target, NAME)
    sync.core = queue.core  # same queue name: read back what the async callers stored
    report = verify_stored(sync, ids)
    sync.close()
    await queue.aclose()
    return report


def outcome(ids: list[str], lat: list[float], elapsed: float, report: dict[str, Any], cpu: float, *,
            per_batch: bool = False) -> dict[str, Any]:
    """Metrics of a run (``cpu``: process CPU seconds over the timed calls; ``per_batch``: the
    calls were batches, also counted)."""
    metrics = {"jobs_per_s": metric(len(ids) / elapsed, "1/s"), "jobs": metric(len(ids), "count"),
               "client_cpu_us_per_job": cpu_per_job(cpu, len(ids))}
    if per_batch:
        metrics["batches_per_s"] = metric(len(lat) / elapsed, "1/s")
    metrics |= {k: metric(v, "ms") for k, v in latency_summary(lat, (50, 99)).items()}
    return {"metrics": metrics, "exactly_once": report, "extra": {}}


async def run_concurrent(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """``callers`` asyncio tasks on one AsyncQueue, each enqueuing one job per call."""
    callers = params["callers"]
    queue = make_async_queue(target, NAME, pool_size=callers, **_batching(params))
    payload = payload_of(params["payload_bytes"])
    # Outside the clock: check the server, load the script, open the connections the callers use.
    warm = await asyncio.gather(*(queue.enqueue("noop", payload) for _ in range(callers)))

    async def call() -> list[Any]:
        return [await queue.enqueue("noop", payload)]

    ids, lat, elapsed, cpu = await timed_tasks(callers, params["min_seconds"], call)
    report = await verify_async(target, queue, [job.id for job in warm] + ids)
    return outcome(ids, lat, elapsed, report, cpu)
