"""failover: the primary holding a queue is killed while a producer and a worker run.

Opt-in (not in the default scenario list: every repetition starts a replicated topology and
waits for a promotion): ``--scenarios failover``. Each repetition starts its own topology from
the target's binaries (``bench.topologies``); the harness's single server stays idle meanwhile.

- ``topology: sentinel``: a primary, two replicas, three Sentinels (down-after ``detect_ms``).
- ``topology: cluster``: 3 primaries with two replicas each (node timeout ``detect_ms``).

Both keep a replica for ``WAIT`` after losing one. Two faults, each with ``wait_replicas`` 0 and 1
(everything else held equal):

- ``fault: kill``: SIGKILL of the primary's process. The kernel still delivers what the process
  had written to its replicas' sockets, so this alone rarely loses an acknowledged write.
- ``fault: cut-then-kill``: the primary is cut off from its replicas for ``cut_ms`` (they are
  frozen with SIGSTOP and their links closed with ``CLIENT KILL TYPE replica``, so they cannot
  reconnect), then killed; the replicas resume after it died. What a network partition followed
  by the loss of the primary's host does: writes acknowledged in between are on the dead primary
  only. Sentinel and Cluster keep running (``cut_ms`` is below their failure detection).

One producer enqueues job ids ``j0, j1, ...`` back to back (``pause_ms`` between calls, ``batch``
jobs per ``enqueue_many`` call, so a backlog builds up as in a busy queue), retrying a call until
it returns (*acknowledged*; the ids make retries idempotent); one thread ``Worker`` (concurrency
4, lease ``lease`` s) runs them. After ``before`` acknowledged enqueues the primary serving the
queue is killed (SIGKILL); the producer continues until ``after`` more are acknowledged, then the
worker drains the queue (``bench.failover.drive``).

Metrics (counts per repetition): ``acknowledged``, ``lost`` (acknowledged, never run),
``ran_twice``, ``enqueue_errors`` (failed calls while the primary was gone); seconds from the
kill to the first acknowledged enqueue (``enqueue_recovery_s``) and to the first job run
(``run_recovery_s``). Losses are what this scenario measures, so it reports no exactly-once
verdict; the HA tests assert that none happen with ``wait_replicas=1``.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios._common import Target, Variant, metric, queue_name

NAME = "failover"
NEEDS_CONVEYOR = True
HEADLINE = ("lost",)
MAX_REPETITIONS = 3
WARMUP = 0
VARIED = ("topology", "fault", "wait_replicas")
DEFAULTS: dict[str, Any] = {"topology": ["sentinel", "cluster"], "fault": ["kill", "cut-then-kill"],
                            "wait_replicas": [0, 1], "before": 3000, "after": 1000, "pause_ms": 0.0,
                            "batch": 10, "cut_ms": 300, "lease": 2.0, "detect_ms": 1000}  # fmt: skip
QUICK: dict[str, Any] = {**DEFAULTS, "before": 300, "after": 100}


def cases(variant: Variant, options: dict[str, Any]) -> list[dict[str, Any]]:
    """Both topologies with and without durability, on the baseline of Redis and Valkey."""
    if not variant.primary or variant.family == "dragonfly":
        return []
    shared = {k: v for k, v in options.items() if k not in VARIED}
    return [{"topology": t, "fault": f, "wait_replicas": w, **shared}
            for t in options["topology"] for f in options["fault"]
            for w in options["wait_replicas"]]  # fmt: skip


def run(target: Target, params: dict[str, Any]) -> dict[str, Any]:
    """One repetition on a freshly started topology."""
    from bench.failover import drive  # noqa: PLC0415 (deliberately lazy: imports the library)

    name = queue_name(NAME)
    with _topology(target, params) as (url, primary_of):
        settings = target.settings(lease=params["lease"], wait_replicas=params["wait_replicas"])
        outcome = drive(lambda: _queue(url, name, settings), lambda: _fault(primary_of(name), params),
                        params["before"], params["after"], pause=params["pause_ms"] / 1000,
                        batch=params["batch"])  # fmt: skip
    counts = {"acknowledged": len(outcome.acknowledged), "lost": len(outcome.lost),
              "ran_twice": len(outcome.ran_twice), "enqueue_errors": outcome.enqueue_errors}  # fmt: skip
    metrics = {k: metric(v, "count") for k, v in counts.items()}
    metrics["enqueue_recovery_s"] = metric(outcome.enqueue_recovery_s, "s")
    metrics["run_recovery_s"] = metric(outcome.run_recovery_s, "s")
    return {"metrics": metrics, "exactly_once": None, "extra": {}}


def _queue(url: str, name: str, settings: dict[str, Any]) -> Any:
    from conveyor import Queue  # noqa: PLC0415 (deliberately lazy)

    return Queue.from_url(url, name, **settings)


def _fault(servers: tuple[Any, list[Any]], params: dict[str, Any]) -> None:
    """Kill the primary (SIGKILL); for ``cut-then-kill`` cut it off from its replicas first."""
    from bench.failover import cut_then_kill  # noqa: PLC0415

    primary, replicas = servers
    if params["fault"] == "cut-then-kill":
        cut_then_kill(primary, replicas, params["cut_ms"] / 1000)
    else:
        primary.kill()


def _topology(target: Target, params: dict[str, Any]) -> Any:
    """A context yielding (URL, queue name -> (its primary, that primary's replicas))."""
    import contextlib  # noqa: PLC0415

    from redis.cluster import key_slot  # noqa: PLC0415

    from bench.failover import shard_of  # noqa: PLC0415
    from bench.topologies import start_cluster, start_sentinel_group  # noqa: PLC0415

    detect = params["detect_ms"]

    @contextlib.contextmanager
    def started() -> Any:
        if params["topology"] == "cluster":
            with start_cluster(target.server, replicas=2, node_timeout_ms=detect) as cluster:
                owner = cluster.owner
                yield cluster.url, lambda name: shard_of(cluster.shards, owner(key_slot(name.encode())))
        else:
            with start_sentinel_group(target.server, down_after_ms=detect) as group:
                yield group.url, lambda name: shard_of([group.servers], group.primary())

    return started()

