"""Shared helpers for scenario modules: the measurement target, clients, exactly-once tracking.

Everything here runs inside the per-repetition child process (``python -m bench.worker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import Counter
from collections.abc import Coroutine, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

T = TypeVar("T")

INJECT_ENV = "BENCH_INJECT"  # test hooks: "duplicate", "lost", "drop-metric:NAME", "die-after-cells:N"

_names = itertools.count()


class ExactlyOnceViolation(Exception):
    """Some enqueued job was not acknowledged exactly once."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        super().__init__(
            "exactly-once violated: "
            + ", ".join(f"{k}={v}" for k, v in report.items() if k != "ok")
        )


@dataclass(frozen=True)
class Target:
    """Where and how a scenario measures: server, configuration, protocol and parser."""

    server: str
    family: str
    version: str | None
    config: str
    url: str
    protocol: int = 3
    parser: str = "hiredis"
    external: bool = False
    mode: str | None = None
    loop: str = "asyncio"  # event loop of the asyncio parts: "asyncio" or "uvloop"
    driver: str = "redis-py"  # Conveyor's client library: "redis-py" or "glide"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)

    def redis(self, **kwargs: Any) -> Any:
        """A synchronous redis-py client for this target."""
        import redis  # noqa: PLC0415 (deliberately lazy)

        return redis.Redis.from_url(self.url, protocol=self.protocol, **kwargs)

    def aredis(self, **kwargs: Any) -> Any:
        """An asyncio redis-py client for this target."""
        import redis.asyncio  # noqa: PLC0415 (deliberately lazy)

        return redis.asyncio.Redis.from_url(self.url, protocol=self.protocol, **kwargs)

    def settings(self, **extra: Any) -> dict[str, Any]:
        """Conveyor QueueSettings keyword arguments for this target."""
        driver = {"driver": self.driver} if self.driver != "redis-py" else {}
        return {"protocol": self.protocol, **driver, **extra}

    def driver_client(self, is_async: bool = False) -> Any:
        """A raw client of the target's driver (redis-py, or glide behind Conveyor's seam)."""
        if self.driver == "redis-py":
            return self.aredis() if is_async else self.redis()
        from conveyor import QueueSettings  # noqa: PLC0415 (deliberately lazy)
        from conveyor._glide import glide_client  # noqa: PLC0415 (deliberately lazy)

        return glide_client(is_async, self.url, QueueSettings(**self.settings()))


LOOPS = ("asyncio", "uvloop")
# --driver: Conveyor's client library, and for redis-py its reply parser.
DRIVERS = ("redis-py", "redis-py-pure", "glide")
DRIVER_SCENARIOS = ("reference", "enqueue-single", "enqueue-bulk", "process", "latency")
# --beside: runtime options measured next to the run's own in the same run. Each case gets a twin
# per option, run right after it in every repetition (each in its own process), so the drift of a
# shared machine between runs minutes apart cannot enter the option's ratio.
BESIDE = {"uvloop": {"loop": "uvloop"}, "glide": {"driver": "glide"}}


def case_target(target: Target, params: dict[str, Any]) -> Target:
    """The target one case runs on: a case that names its loop or driver (a --beside twin, or
    every case of a --loop/--driver run) runs on it; redis-py-pure is redis-py with the Python
    parser, which the repetition's process chose at start (target.parser)."""
    loop = params.get("loop", target.loop)
    driver = "glide" if params.get("driver", target.driver) == "glide" else "redis-py"
    return replace(target, loop=loop, driver=driver)


def run_async(target: Target, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the target's event loop (the standard one or uvloop)."""
    if target.loop == "uvloop":
        import uvloop  # noqa: PLC0415 (deliberately lazy: an optional runtime)

        return uvloop.run(coro)
    return asyncio.run(coro)


def queue_name(scenario: str) -> str:
    """A queue name unique to this process and call."""
    return f"bench-{scenario}-{os.getpid()}-{next(_names)}"


def payload_of(size: int) -> dict[str, str]:
    """A JSON payload whose serialized form is about ``size`` bytes."""
    return {"d": "x" * max(size - 9, 0)}


@dataclass
class Tracker:
    """Counts handler calls by job id to verify exactly-once processing."""

    enqueued: set[str] = field(default_factory=set)
    calls: Counter[str] = field(default_factory=Counter)
    inject: str = field(default_factory=lambda: os.environ.get(INJECT_ENV, ""))

    def add(self, ids: Iterable[str]) -> None:
        """Record enqueued job ids."""
        self.enqueued.update(ids)

    def handled(self, job_id: str) -> None:
        """Record one acknowledged handler call (honours the injection test hook once)."""
        if self.inject == "lost":
            self.inject = ""
            return
        self.calls[job_id] += 1
        if self.inject == "duplicate":
            self.inject = ""
            self.calls[job_id] += 1

    def report(self) -> dict[str, Any]:
        """enqueued/acked/duplicates/lost counts and ok flag."""
        seen = {k for k, v in self.calls.items() if v > 0}
        duplicates = sum(v - 1 for v in self.calls.values() if v > 1)
        unexpected = len(seen - self.enqueued)
        lost = len(self.enqueued - seen)
        acked = sum(self.calls.values())
        ok = duplicates == 0 and lost == 0 and unexpected == 0 and acked == len(self.enqueued)
        return {
            "enqueued": len(self.enqueued),
            "acked": acked,
            "duplicates": duplicates + unexpected,
            "lost": lost,
            "ok": ok,
        }

    def verify(self) -> dict[str, Any]:
        """Return the report, or raise :class:`ExactlyOnceViolation`."""
        report = self.report()
        if not report["ok"]:
            raise ExactlyOnceViolation(report)
        return report


class Clock:
    """A perf_counter stopwatch."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since construction."""
        return time.perf_counter() - self.start


def metric(value: float, unit: str) -> list[Any]:
    """One repetition's value for a metric, as sent back to the harness."""
    return [float(value), unit]


def cpu_per_job(cpu_seconds: float, jobs: int) -> list[Any]:
    """Client CPU per job, in µs: this process's CPU time (user + system, all threads: the
    library, redis-py, the event loop and the scenario's own bookkeeping) over the jobs done
    in that time. Unlike a rate, it does not move with the server's speed or the machine's load."""
    return metric(cpu_seconds * 1e6 / max(jobs, 1), "us")


def server_info(client: Any, section: str) -> dict[str, Any]:
    """INFO <section> as a dict (works with RESP2 and RESP3 clients)."""
    return dict(client.info(section))


@dataclass(frozen=True)
class Variant:
    """One measured combination; ``primary`` is the baseline that runs every case."""

    server: str
    family: str
    config: str
    protocol: int
    parser: str
    primary: bool
    quick: bool = False
    base_config: bool = True
    client_side: bool = True  # this server also runs the client-side variations (first server)

    @property
    def label(self) -> str:
        """Short human label such as ``valkey-9.1/default/resp3/hiredis``."""
        return f"{self.server}/{self.config}/resp{self.protocol}/{self.parser}"


def make_queue(target: Target, scenario: str, **settings: Any) -> Any:
    """A synchronous ``conveyor.Queue`` with a fresh unique name on ``target``."""
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    return Queue.from_url(target.url, queue_name(scenario), **target.settings(**settings))


def make_async_queue(target: Target, scenario: str, name: str | None = None,
                     **settings: Any) -> Any:
    """An ``conveyor.AsyncQueue`` (create inside the running event loop)."""
    from conveyor import AsyncQueue  # noqa: PLC0415 (deliberately lazy)

    return AsyncQueue.from_url(target.url, name or queue_name(scenario),
                               **target.settings(**settings))


def specs(count: int, payload_bytes: int, task: str = "noop", **kw: Any) -> list[Any]:
    """``count`` JobSpecs with payloads of about ``payload_bytes``."""
    from conveyor import JobSpec  # noqa: PLC0415 (deliberately lazy)

    payload = payload_of(payload_bytes)
    return [JobSpec(task, payload, **kw) for _ in range(count)]


def fill(queue: Any, count: int, payload_bytes: int, batch: int = 1000, **kw: Any) -> list[str]:
    """Enqueue ``count`` jobs in batches (not timed); return their ids."""
    ids: list[str] = []
    while len(ids) < count:
        jobs = queue.enqueue_many(specs(min(batch, count - len(ids)), payload_bytes, **kw))
        ids += [job.id for job in jobs]
    return ids


def check_counts(queue: Any, **expected: int) -> dict[str, int]:
    """Raise ExactlyOnceViolation when the server's counts differ from ``expected``."""
    counts = queue.counts()
    wrong = {k: (counts.get(k), v) for k, v in expected.items() if counts.get(k) != v}
    if wrong:
        raise ExactlyOnceViolation({"server_counts_got_want": wrong, "ok": False})
    return counts


async def acheck_counts(queue: Any, **expected: int) -> dict[str, int]:
    """Async twin of :func:`check_counts`."""
    counts = await queue.counts()
    wrong = {k: (counts.get(k), v) for k, v in expected.items() if counts.get(k) != v}
    if wrong:
        raise ExactlyOnceViolation({"server_counts_got_want": wrong, "ok": False})
    return counts


def flush_sync(client: Any, everything: bool = False, timeout: float = 30.0) -> None:
    """FLUSHDB (or FLUSHALL) SYNC, then wait until no lazily freed objects remain.

    Plain FLUSHDB frees memory in the background when ``lazyfree-lazy-user-flush`` is on
    (the default on Valkey 8+), which would skew ``used_memory`` readings that follow.
    """
    import redis  # noqa: PLC0415 (deliberately lazy)

    command = "FLUSHALL" if everything else "FLUSHDB"
    try:
        client.execute_command(command, "SYNC")
    except redis.ResponseError:
        client.execute_command(command)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = client.info("memory").get("lazyfree_pending_objects", 0)
        if not int(pending):
            return
        time.sleep(0.01)


# A full collection of the server's Lua heap: Redis 8 counts that heap in used_memory (Valkey
# and Redis 7.0 do not), and the garbage a run of enqueue scripts leaves swung a 2,000-job
# slope there by up to 90 B/job between repetitions (vm_eval 100 kB to 185 kB at one point).
_LUA_GC = "collectgarbage('collect') return 0"


def used_memory(client: Any) -> int:
    """INFO ``used_memory`` after a full Lua garbage collection, so that only live data counts.

    A server that refuses the script (no ``collectgarbage``, scripting off) is read as it is."""
    import redis  # noqa: PLC0415 (deliberately lazy)

    with contextlib.suppress(redis.ResponseError):
        client.eval(_LUA_GC, 0)
    return int(client.info("memory")["used_memory"])


def preload_scripts(url: str) -> int:
    """SCRIPT LOAD every Conveyor script so no NOSCRIPT round trip lands inside a clock.

    Uses the library's internal script table when present; returns how many were loaded.
    """
    import redis  # noqa: PLC0415 (deliberately lazy)

    try:
        from conveyor._scripts import Scripts  # noqa: PLC0415 (deliberately lazy)
    except ImportError:
        return 0
    client = redis.Redis.from_url(url)
    try:
        for script in Scripts:
            client.script_load(script.value.source)
    finally:
        client.close()
    return len(Scripts)


def sized_jobs(rate: float, min_seconds: float, floor: int, cap: int) -> int:
    """Jobs needed to keep a drain at ``rate`` jobs/s busy for ``min_seconds`` (+10%)."""
    return max(floor, min(cap, int(rate * min_seconds * 1.1) + 1))


def run_for(min_seconds: float, step: Any) -> tuple[int, float]:
    """Call ``step()`` (returns items done) until ``min_seconds`` passed; (items, seconds)."""
    done = 0
    start = time.perf_counter()
    while True:
        done += step()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return done, elapsed


def run_calls(min_seconds: float, call: Any) -> tuple[int, float]:
    """Call ``call()`` one at a time until ``min_seconds`` passed; (calls, seconds)."""

    def step() -> int:
        call()
        return 1

    return run_for(min_seconds, step)
