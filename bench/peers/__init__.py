"""Peers: Conveyor against the Python queues a team would otherwise pick, in the same run.

Each library is installed from a pinned requirement in its own virtual environment (their
redis-py pins conflict; see :mod:`bench.peers.venvs`) and driven as a subprocess through one
adapter interface (:mod:`bench.peers.adapters`). This module holds only the registry: pins,
settings at defaults and at the best documented tuning, and the recovery settings used by the
crash table. It imports nothing beyond the standard library and ``bench.environment`` (the child
processes import it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.environment import cores

# Cheapest result retention, applied to every flavour of a library (fairness rule).
_BULLMQ_JOB = {"removeOnComplete": True}
_SAQ_JOB = {"ttl": -1}
_RQ_JOB = {"result_ttl": 0}
_CELERY = {"task_ignore_result": True}
# Worker processes for the rows tuned by running several (each library's docs or CLI default
# to one per core or recommend it): the scenario's concurrency is split over them, so the
# total stays the scenario's. The cores this process may use (as the result file records them).
CPUS = cores()


@dataclass(frozen=True)
class Library:
    """One library: how to install it, and the settings each measured row uses."""

    name: str
    requirements: tuple[str, ...]  # empty: runs in the suite's own environment
    adapter: str
    flavors: dict[str, dict[str, Any]]  # row label -> adapter settings
    recovery: dict[str, Any]  # settings for the crash table (documented recovery knobs)
    retention: str  # what is stored per finished job at the settings used
    concurrency_note: str = ""
    caveats: str = ""
    notes: dict[str, str] = field(default_factory=dict)  # flavor -> what the settings mean
    sources: dict[str, str] = field(default_factory=dict)  # flavor -> where its docs name the tuning
    # flavor -> the only process concurrencies the row runs, with no latency case: a tuning
    # that matters under load is measured where the goal compares (keeps a full run near 30 min)
    only: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def cases(self, flavor: str, concurrencies: list[int]) -> tuple[list[int], bool]:
        """The process concurrencies row ``flavor`` runs, and whether it runs latency."""
        if flavor in self.only:
            return [c for c in concurrencies if c in self.only[flavor]], False
        return list(concurrencies), True


LIBRARIES: dict[str, Library] = {lib.name: lib for lib in (
    Library(
        "conveyor", (), "conveyor",
        # The tuned row is the AsyncWorker's, Conveyor's better default: less worker CPU per job
        # than the sync Worker at concurrency 32 and 100 (what a second process on a shared
        # core needs most), and the README's worker.
        {"Worker": {"worker": "sync"}, "AsyncWorker": {"worker": "async"},
         "AsyncWorker tuned": {"worker": "async", "processes": CPUS}},
        {"lease": 5.0}, "nothing (keep_completed=0, the default)",
        notes={"Worker": "sync Worker, one thread per slot",
               "AsyncWorker": "asyncio AsyncWorker",
               "AsyncWorker tuned": f"{CPUS} AsyncWorker processes sharing the concurrency (one "
                                    "worker process per core: the Tuning page)"},
        sources={"AsyncWorker tuned": "tuning.md#worker-processes"},
        only={"AsyncWorker tuned": (32,)},
        caveats="Lease renewal by heartbeats; the worker acknowledges and claims in one script.",
    ),
    Library(
        "bullmq", ("bullmq==3.4.4", "redis==8.1.0", "hiredis==3.5.0"), "bullmq",
        {"default": {"job": _BULLMQ_JOB},
         "tuned": {"job": _BULLMQ_JOB, "processes": CPUS}},
        {"job": _BULLMQ_JOB,
         "worker": {"lockDuration": 5000, "stalledInterval": 5000, "maxStalledCount": 1}},
        "nothing (removeOnComplete=True; the default keeps every completed job)",
        notes={"default": "one Worker process",
               "tuned": f"{CPUS} Worker processes sharing the concurrency (several workers in "
                        "different processes: the setup the docs recommend)"},
        sources={"tuned": "https://docs.bullmq.io/guide/workers/concurrency"},
        only={"tuned": (32,)},
        caveats="Keeps a job hash, events stream entries and a lock per job.",
    ),
    Library(
        "saq", ("saq==0.26.4", "typing-extensions==4.16.0", "redis==8.1.0", "hiredis==3.5.0"), "saq",
        {"default": {"job": _SAQ_JOB}, "tuned": {"job": _SAQ_JOB, "processes": CPUS}},
        {"job": {**_SAQ_JOB, "timeout": 5, "retries": 3}, "worker": {"timers": {"sweep": 1}}},
        "nothing (ttl=-1; the default keeps job and result for 600 s)",
        notes={"default": "one Worker process, BLMOVE-based dequeue",
               "tuned": f"{CPUS} Worker processes sharing the concurrency (\"easily run multiple "
                        "workers to leverage more cores\"; CLI --workers)"},
        sources={"tuned": "https://saq-py.readthedocs.io/en/latest/comparison.html"},
        only={"tuned": (32,)},
        caveats="Stores a job hash per job; the sweep recovers jobs past their timeout.",
    ),
    Library(
        "arq", ("arq==0.28.0", "redis==5.3.1", "hiredis==3.5.0"), "arq",
        {"default": {"worker": {"keep_result": 0}},
         "tuned": {"worker": {"keep_result": 0, "poll_delay": 0.01}}},
        {"worker": {"keep_result": 0, "poll_delay": 0.01, "job_timeout": 5, "max_tries": 5}},
        "nothing (keep_result=0; the default keeps results 3600 s)",
        notes={"default": "poll_delay 0.5 s (default)", "tuned": "poll_delay 0.01 s"},
        caveats="Polls one sorted set; WATCH/MULTI per job instead of scripts.",
    ),
    Library(
        "rq", ("rq==3.0.0", "redis==8.1.0", "hiredis==3.5.0"), "rq",
        {"default": {"job": _RQ_JOB, "worker_class": "Worker"},
         "tuned": {"job": _RQ_JOB, "worker_class": "SimpleWorker"}},
        {"job": {**_RQ_JOB, "job_timeout": 5, "retry_max": 3}, "worker_class": "SimpleWorker"},
        "nothing (result_ttl=0)",
        concurrency_note="processes, at most 16 (RQ has no in-process concurrency)",
        notes={"default": "Worker: forks a work horse per job",
               "tuned": "SimpleWorker: runs jobs in the worker process"},
        caveats="Stores a job hash per job and tracks running jobs in a started-job registry (a sorted set).",
    ),
    Library(
        "dramatiq", ("dramatiq[redis]==2.2.1", "redis==8.1.0", "hiredis==3.5.0"), "dramatiq",
        {"default": {}, "tuned": {"processes": CPUS}},
        {"broker": {"heartbeat_timeout": 5000}},
        "nothing (no results middleware)",
        notes={"default": "one process, worker_threads = concurrency; prefetch 2 per thread",
               "tuned": f"{CPUS} processes sharing the concurrency as threads (the dramatiq "
                        "CLI's default: one process per CPU core)"},
        sources={"tuned": "https://dramatiq.io/guide.html"},
        only={"tuned": (32,)},
        caveats="No bulk send; messages of a dead worker are requeued after heartbeat_timeout.",
    ),
    Library(
        "taskiq", ("taskiq-redis==1.2.4", "taskiq==0.13.0", "redis==8.1.0", "hiredis==3.5.0"),
        "taskiq",
        {"default": {}, "tuned": {"processes": CPUS}},
        {"broker": {"idle_timeout": 5000}},
        "nothing (no result backend)",
        notes={"default": "RedisStreamBroker (acknowledged streams), one process, "
                          "max_async_tasks = concurrency",
               "tuned": f"{CPUS} worker processes sharing max_async_tasks (taskiq worker "
                        "--workers; its default is 2)"},
        sources={"tuned": "https://taskiq-python.github.io/guide/cli.html"},
        only={"tuned": (32,)},
        caveats="Unacknowledged messages are reclaimed after idle_timeout (default 10 min), "
                "and only in a listen loop that has just read new messages (taskiq-redis "
                "1.2.4 source): with no new traffic a dead consumer's messages stay pending.",
    ),
    Library(
        "streaq", ("streaq==7.2.0", "hiredis==3.5.0"), "streaq",
        {"default": {"task": {"ttl": 0}}, "tuned": {"task": {"ttl": 0}, "processes": CPUS}},
        {"task": {"ttl": 0}, "worker": {"idle_timeout": 5}},
        "nothing (ttl=0; the default keeps results 5 min)",
        notes={"default": "one Worker process, pickle serializer (its default)",
               "tuned": f"{CPUS} Worker processes sharing the concurrency (streaq --workers)"},
        sources={"tuned": "https://streaq.readthedocs.io/en/latest/worker.html"},
        only={"tuned": (32,)},
        caveats="Needs Redis Functions (no Dragonfly); uses coredis, not redis-py.",
    ),
    Library(
        "celery", ("celery[redis]==5.7.0", "redis==8.1.0", "hiredis==3.5.0"), "celery",
        {"default": {"conf": _CELERY},
         "tuned": {"conf": {**_CELERY, "worker_prefetch_multiplier": 16}}},
        {"conf": {**_CELERY, "task_acks_late": True, "task_reject_on_worker_lost": True,
                  "broker_transport_options": {"visibility_timeout": 5}}},
        "nothing (task_ignore_result=True)",
        concurrency_note="threads pool (prefork needs a process per slot)",
        notes={"default": "threads pool, prefetch multiplier 4",
               "tuned": "threads pool, prefetch multiplier 16"},
        caveats="Acknowledges on receipt by default: acks_late is the recovery setting.",
    ),
    Library(
        "huey", ("huey==3.5.4", "redis==8.1.0", "hiredis==3.5.0", "gevent==26.9.0"), "huey",
        {"default": {"huey": {"results": False}},
         "tuned": {"huey": {"results": False}, "consumer": {"worker_type": "greenlet"}}},
        {"huey": {"results": False}},
        "nothing (results=False)",
        notes={"default": "thread workers, blocking BRPOP",
               "tuned": "greenlet workers (gevent), blocking BRPOP"},
        sources={"tuned": "https://huey.readthedocs.io/en/latest/consumer.html"},
        only={"tuned": (32,)},
        caveats="No acknowledgement: a job popped by a dead worker is gone (by design).",
    ),
)}

PEERS = tuple(n for n in LIBRARIES if n != "conveyor")


def resolve(names: list[str]) -> list[str]:
    """``["all"]`` -> every library; unknown names raise SystemExit listing the known ones."""
    if "all" in names:
        return list(LIBRARIES)
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown:
        raise SystemExit(f"unknown librar{'y' if len(unknown) == 1 else 'ies'} "
                         f"{', '.join(unknown)}; known: all, {', '.join(LIBRARIES)}")
    return list(dict.fromkeys(names))
