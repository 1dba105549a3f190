"""Kill the primary holding a queue while producers and a worker run; count lost and repeated jobs.

The fault: the primary is cut off from its replicas (a partition), then dies (its host lost).
Without durability the writes it acknowledged meanwhile are lost (asynchronous replication): the
tests print those counts and assert that clients and workers resumed by themselves. With
`wait_replicas=1` every acknowledged enqueue must survive, behind Sentinel and on Cluster (WAIT
on the connection to the queue's slot owner). Switchovers (a live primary demoted) lose nothing.
The measured table (with and without the setting) comes from the `failover` benchmark scenario.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import redis
from _ha import HA_KIND, started
from conveyor import Queue
from redis.cluster import key_slot

from bench.failover import Outcome, cut_then_kill, drive, shard_of
from bench.topologies import Cluster, SentinelGroup, start_cluster, start_sentinel_group, wait_until

LEASE = 2.0  # short, so jobs whose claim the new primary never saw are redelivered quickly
CUT = 0.3  # seconds the primary serves with no replica before it dies (below failure detection)


@pytest.fixture
def fresh_sentinels() -> Iterator[SentinelGroup]:
    yield from started(start_sentinel_group)


@pytest.fixture
def fresh_cluster() -> Iterator[Cluster]:
    yield from started(start_cluster)


def _report(label: str, outcome: Outcome, record: pytest.RecordProperty) -> None:
    record("failover", f"{label}: {outcome.summary()}")
    print(f"\nFAILOVER {HA_KIND} {label}: {outcome.summary()}")  # shown with -rP / -s


def _resumed(outcome: Outcome) -> None:
    assert outcome.ran_after_kill > 0, "the worker never ran a job after the failover"


@pytest.mark.parametrize("wait", [0, 1])
def test_sentinel_partition_then_primary_loss(
    fresh_sentinels: SentinelGroup, record_property: pytest.RecordProperty, wait: int
) -> None:
    """The primary is cut off from its replicas, then dies; clients and the worker carry on.

    Without wait_replicas the enqueues it acknowledged meanwhile are lost (counted, printed);
    with it none is, and the cut was felt (some calls failed and were retried with their ids).
    """
    group = fresh_sentinels
    outcome = drive(
        lambda: Queue.from_url(group.url, "fo", lease=LEASE, wait_replicas=wait),
        lambda: cut_then_kill(*shard_of([group.servers], group.primary()), CUT),
        pause=0, batch=10,
    )  # fmt: skip
    _report(f"sentinel, cut-then-kill, wait_replicas={wait}", outcome, record_property)
    _resumed(outcome)
    if wait:
        assert outcome.lost == []
        assert outcome.enqueue_errors > 0


@pytest.mark.parametrize("wait", [0, 1])
def test_cluster_partition_then_primary_loss(record_property: pytest.RecordProperty, wait: int) -> None:
    """The same on Cluster, WAIT on the slot owner's connection. Two replicas per shard: after the
    promotion the new primary still has one to WAIT for."""
    for cluster in started(lambda kind: start_cluster(kind, replicas=2)):
        owner = cluster.owner(key_slot(b"fo"))
        outcome = drive(
            lambda: Queue.from_url(cluster.url, "fo", lease=LEASE, wait_replicas=wait),
            lambda: cut_then_kill(*shard_of(cluster.shards, owner), CUT),
            pause=0, batch=10,
        )  # fmt: skip
        _report(f"cluster, cut-then-kill, wait_replicas={wait}", outcome, record_property)
        _resumed(outcome)
        assert cluster.owner(key_slot(b"fo")) is not owner
        if wait:
            assert outcome.lost == []
            assert outcome.enqueue_errors > 0


def test_sentinel_switchover_loses_nothing_and_workers_follow(
    fresh_sentinels: SentinelGroup, record_property: pytest.RecordProperty
) -> None:
    """SENTINEL FAILOVER demotes a live primary: old connections meet READONLY or are killed."""
    group = fresh_sentinels
    old = group.primary()

    def switchover() -> None:
        # A loaded machine can make Sentinel abort a failover: ask again until the primary moved.
        for _ in range(3):
            with group.sentinels[0].client() as sentinel, contextlib.suppress(redis.ResponseError):
                sentinel.execute_command("SENTINEL", "FAILOVER", group.service)
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: group.primary() is not old, "the switchover", 30)
                return

    outcome = drive(lambda: Queue.from_url(group.url, "fo", lease=LEASE), switchover)
    _report("sentinel switchover", outcome, record_property)
    _resumed(outcome)
    assert outcome.lost == []
    assert group.primary() is not old


def test_cluster_switchover_loses_nothing_and_workers_follow_moved(
    fresh_cluster: Cluster, record_property: pytest.RecordProperty
) -> None:
    """CLUSTER FAILOVER on the replica: the old primary answers MOVED, clients follow it."""
    cluster = fresh_cluster
    old = cluster.owner(key_slot(b"fo"))
    replica = next(shard[1] for shard in cluster.shards if shard[0] is old)

    def switchover() -> None:
        for _ in range(3):  # a manual failover can time out on a loaded machine: ask again
            with replica.client() as client:
                client.execute_command("CLUSTER", "FAILOVER")
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: cluster.owner(key_slot(b"fo")) is replica, "the switchover", 30)
                return

    outcome = drive(lambda: Queue.from_url(cluster.url, "fo", lease=LEASE), switchover)
    _report("cluster switchover", outcome, record_property)
    _resumed(outcome)
    assert outcome.lost == []
    assert cluster.owner(key_slot(b"fo")) is replica
