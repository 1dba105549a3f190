"""reference: client and server ceilings on this machine, without Conveyor.

Every queue figure can be read as a fraction of these. Measured with redis-py only:

- ``ping_c1_ops_per_s`` / ``evalsha_c1_ops_per_s``: one command at a time (sync client);
- ``ping_cN_ops_per_s`` / ``evalsha_cN_ops_per_s``: ``concurrency`` asyncio tasks, one command in
  flight each, on a pool of ``concurrency`` connections;
- ``ping_pipelined_ops_per_s`` / ``evalsha_pipelined_ops_per_s``: pipelines of ``pipeline``
  commands (no MULTI).

The trivial script is ``return 1``, loaded with SCRIPT LOAD before the clock starts.
Params: ``ops`` (commands per one-at-a-time mode), ``concurrency``, ``pipeline``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.scenarios._common import Target, Variant, metric

NAME = "reference"
NEEDS_CONVEYOR = False
DEFAULTS: dict[str, Any] = {"ops": 5000, "concurrency": 32, "pipeline": 100}
QUICK: dict[str, Any] = {"ops": 1000, "concurrency": 32, "pipeline": 100}
SCRIPT = "return 1"


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Client ceilings depend on protocol and parser, not on server persistence."""
    if not variant.base_config:
        return []
    return [dict(options)]


def _sync_rate(fn: Any, ops: int) -> float:
    """Operations per second of ``ops`` sequential calls of ``fn``."""
    start = time.perf_counter()
    for _ in range(ops):
        fn()
    return ops / (time.perf_counter() - start)


def _pipelined_rate(client: Any, sha: str | None, ops: int, batch: int) -> float:
    """Operations per second with pipelines of ``batch`` commands."""
    start = time.perf_counter()
    done = 0
    while done < ops:
        pipe = client.pipeline(transaction=False)
        for _ in range(min(batch, ops - done)):
            pipe.evalsha(sha, 0) if sha else pipe.ping()
        done += len(pipe.execute())
    return done / (time.perf_counter() - start)


async def _concurrent_rate(target: Target, sha: str | None, ops: int, conc: int) -> float:
    """Operations per second with ``conc`` tasks issuing commands one at a time."""
    client = target.aredis(max_connections=conc)
    per_task = max(ops // conc, 1)

    async def loop() -> None:
        for _ in range(per_task):
            await (client.evalsha(sha, 0) if sha else client.ping())

    await asyncio.gather(*(client.ping() for _ in range(conc)))  # open the connections first
    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(conc)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    return per_task * conc / elapsed


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition: all six ceilings."""
    ops, conc, batch = params["ops"], params["concurrency"], params["pipeline"]
    client = target.redis()
    sha = client.script_load(SCRIPT)
    client.ping()
    metrics = {
        "ping_c1_ops_per_s": metric(_sync_rate(client.ping, ops), "1/s"),
        "evalsha_c1_ops_per_s": metric(_sync_rate(lambda: client.evalsha(sha, 0), ops), "1/s"),
        "ping_cN_ops_per_s": metric(asyncio.run(_concurrent_rate(target, None, ops * 2, conc)),
                                    "1/s"),
        "evalsha_cN_ops_per_s": metric(asyncio.run(_concurrent_rate(target, sha, ops * 2, conc)),
                                       "1/s"),
        "ping_pipelined_ops_per_s": metric(_pipelined_rate(client, None, ops * 10, batch), "1/s"),
        "evalsha_pipelined_ops_per_s": metric(_pipelined_rate(client, sha, ops * 10, batch),
                                              "1/s"),
    }
    client.close()
    return {"metrics": metrics, "exactly_once": None, "extra": {"script": SCRIPT}}
