"""reference: client and server ceilings on this machine, without Conveyor.

Every queue figure can be read as a fraction of these. Measured with the run's driver (redis-py,
or with ``--driver glide`` valkey-glide, whose one multiplexed connection replaces the pool):

- ``ping_c1_ops_per_s`` / ``evalsha_c1_ops_per_s``: one command at a time (sync client);
- ``ping_cN_ops_per_s`` / ``evalsha_cN_ops_per_s``: ``concurrency`` asyncio tasks, one command in
  flight each, on a pool of ``concurrency`` connections;
- ``ping_pipelined_ops_per_s`` / ``evalsha_pipelined_ops_per_s``: pipelines of ``pipeline``
  commands (no MULTI).

The trivial script is ``return 1``, loaded with SCRIPT LOAD before the clock starts. Each of
the six modes runs for at least ``seconds``.
Params: ``seconds`` (per mode), ``concurrency``, ``pipeline``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.scenarios._common import Target, Variant, metric, run_async, run_calls, run_for

NAME = "reference"
NEEDS_CONVEYOR = False
HEADLINE_CASE = {"metric": "evalsha_cN_ops_per_s", "params": {},
                 "conditions": "trivial script (return 1), 32 concurrent callers, one command "
                               "in flight each, RESP3, hiredis"}
DEFAULTS: dict[str, Any] = {"seconds": 2.0, "concurrency": 32, "pipeline": 100}
QUICK: dict[str, Any] = {"seconds": 0.1, "concurrency": 32, "pipeline": 100}
SCRIPT = "return 1"


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Client ceilings depend on protocol and parser, not on server persistence."""
    if not variant.base_config:
        return []
    return [dict(options)]


def _sync_rate(fn: Any, seconds: float) -> float:
    """Operations per second of sequential calls of ``fn`` for ``seconds``."""

    done, elapsed = run_calls(seconds, fn)
    return done / elapsed


def ping_of(client: Any) -> Any:
    """PING as the client spells it (the glide adapter exposes only Conveyor's seam)."""
    return getattr(client, "ping", None) or (lambda: client.execute_command("PING"))


def _pipelined_rate(client: Any, sha: str | None, seconds: float, batch: int) -> float:
    """Operations per second with pipelines of ``batch`` commands."""

    def one() -> int:
        pipe = client.pipeline(transaction=False)
        for _ in range(batch):
            pipe.evalsha(sha, 0) if sha else pipe.execute_command("PING")
        return len(pipe.execute())

    done, elapsed = run_for(seconds, one)
    return done / elapsed


async def _concurrent_rate(target: Target, sha: str | None, seconds: float, conc: int) -> float:
    """Operations per second with ``conc`` tasks issuing commands one at a time."""
    glide = target.driver == "glide"
    client = target.driver_client(True) if glide else target.aredis(max_connections=conc)
    ping = ping_of(client)
    done = [0]

    async def loop() -> None:
        while time.perf_counter() < deadline:
            await (client.evalsha(sha, 0) if sha else ping())
            done[0] += 1

    await asyncio.gather(*(ping() for _ in range(conc)))  # open the connections first
    start = time.perf_counter()
    deadline = start + seconds
    await asyncio.gather(*(loop() for _ in range(conc)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    return done[0] / elapsed


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition: all six ceilings."""
    secs, conc, batch = params["seconds"], params["concurrency"], params["pipeline"]
    client = target.driver_client()
    sha = client.script_load(SCRIPT)
    sha = sha.decode() if isinstance(sha, bytes) else sha
    ping = ping_of(client)
    ping()
    metrics = {
        "ping_c1_ops_per_s": metric(_sync_rate(ping, secs), "1/s"),
        "evalsha_c1_ops_per_s": metric(_sync_rate(lambda: client.evalsha(sha, 0), secs), "1/s"),
        "ping_cN_ops_per_s": metric(run_async(target, _concurrent_rate(target, None, secs, conc)),
                                    "1/s"),
        "evalsha_cN_ops_per_s": metric(run_async(target, _concurrent_rate(target, sha, secs, conc)),
                                       "1/s"),
        "ping_pipelined_ops_per_s": metric(_pipelined_rate(client, None, secs, batch), "1/s"),
        "evalsha_pipelined_ops_per_s": metric(_pipelined_rate(client, sha, secs, batch),
                                              "1/s"),
    }
    client.close()
    return {"metrics": metrics, "exactly_once": None, "extra": {"script": SCRIPT}}
