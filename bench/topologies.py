"""Replicated topologies for tests: a Redis Cluster and a primary watched by Sentinels.

Built from the same binaries and launcher as single servers (`bench.servers.start_server`): every
process listens on a free loopback port, lives in its own temp dir and is stopped (and its dir
removed) when the context exits, even after a failure. The cluster is assembled with the server's
own commands (CLUSTER ADDSLOTSRANGE / MEET / REPLICATE), the same steps `valkey-cli --cluster
create` performs; readiness is proven by the servers' own reports (cluster_state:ok, replication
links up, Sentinels that see each other), never by a sleep.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from bench.servers import RunningServer, ServerStartError, get_kind, locate, start_server
from bench.servers.catalog import HOST
from bench.servers.launcher import _free_port

__all__ = ["CLUSTER_SLOTS", "Cluster", "SentinelGroup", "start_cluster", "start_sentinel_group"]

CLUSTER_SLOTS = 16384
SERVICE = "conveyor"
READY_TIMEOUT = 60.0


def wait_until(check: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll `check` until it is true; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError):
            if check():
                return
        time.sleep(0.1)
    raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")


def _info(srv: RunningServer, section: str) -> dict[str, object]:
    with srv.client(socket_timeout=2) as client:
        return {str(k): v for k, v in client.info(section).items()}


def _replica_linked(srv: RunningServer) -> bool:
    return _info(srv, "replication").get("master_link_status") == "up"


# --------------------------------------------------------------------------- cluster


@dataclass
class Cluster:
    """A running cluster: `shards[i]` is [primary, replica, ...] as built (roles change on failover)."""

    shards: list[list[RunningServer]]
    node_timeout_ms: int

    @property
    def nodes(self) -> list[RunningServer]:
        return [srv for shard in self.shards for srv in shard]

    @property
    def url(self) -> str:
        """A `redis+cluster://` URL listing every node as a startup node."""
        return "redis+cluster://" + ",".join(f"{s.host}:{s.port}" for s in self.nodes)

    def owner(self, slot: int) -> RunningServer:
        """The live node currently serving `slot` as primary."""
        for srv in self.nodes:
            if not srv.running:
                continue
            with contextlib.suppress(redis.RedisError, OSError), srv.client(socket_timeout=2) as c:
                for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        host, port = _text(primary[0]), int(primary[1])
                        return next(n for n in self.nodes if (n.host, n.port) == (host, port))
        raise LookupError(f"no live node reports an owner for slot {slot}")

    def wait_healthy(self, timeout: float = READY_TIMEOUT) -> None:
        """Every live node reports cluster_state:ok and agrees on who owns every slot."""
        wait_until(lambda: all(_cluster_ok(s) for s in self.nodes if s.running), "cluster_state:ok", timeout)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cluster_ok(srv: RunningServer) -> bool:
    with srv.client(socket_timeout=2) as client:
        return "cluster_state:ok" in _text(client.execute_command("CLUSTER", "INFO"))


def _node_id(srv: RunningServer) -> str:
    with srv.client(socket_timeout=2) as client:
        return _text(client.execute_command("CLUSTER", "MYID"))


def _known_nodes(srv: RunningServer) -> int:
    with srv.client(socket_timeout=2) as client:
        text = _text(client.execute_command("CLUSTER", "INFO"))
    return int(text.split("cluster_known_nodes:")[1].split()[0])


def _assemble(shards: list[list[RunningServer]]) -> None:
    """Slots split evenly over the primaries, every node met, each replica attached to its primary."""
    primaries = [shard[0] for shard in shards]
    per = CLUSTER_SLOTS // len(primaries)
    for i, primary in enumerate(primaries):
        end = CLUSTER_SLOTS - 1 if i == len(primaries) - 1 else (i + 1) * per - 1
        with primary.client() as client:
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, end)
    first = primaries[0]
    with first.client() as client:
        bus_port = int(client.config_get("cluster-port")["cluster-port"])
    all_nodes = [srv for shard in shards for srv in shard]
    for srv in all_nodes[1:]:
        with srv.client() as client:
            client.execute_command("CLUSTER", "MEET", first.host, first.port, bus_port)
    wait_until(lambda: all(_known_nodes(s) == len(all_nodes) for s in all_nodes), "every node to meet")
    for shard in shards:
        primary_id = _node_id(shard[0])
        for replica in shard[1:]:
            with replica.client() as client:
                client.execute_command("CLUSTER", "REPLICATE", primary_id)


def _cluster_node(kind: str, flags: list[str]) -> contextlib.AbstractContextManager[RunningServer]:
    # The bus port defaults to port + 10000, impossible above 55535: pick one explicitly.
    return start_server(kind, extra_args=[*flags, "--cluster-port", str(_free_port())])


@contextlib.contextmanager
def start_cluster(
    kind: str = "valkey-9.1", primaries: int = 3, replicas: int = 1, node_timeout_ms: int = 1000
) -> Iterator[Cluster]:
    """Start `primaries` x (1 + `replicas`) cluster nodes, assemble them, yield, stop everything."""
    if primaries < 3:
        raise ValueError(f"a cluster needs at least 3 primaries to fail over, got {primaries}")
    flags = [
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(node_timeout_ms),
        # A replica may be promoted however long its link was down: the tests kill primaries.
        "--cluster-replica-validity-factor", "0",
    ]  # fmt: skip
    with contextlib.ExitStack() as stack:
        shards = [
            [stack.enter_context(_cluster_node(kind, flags)) for _ in range(1 + replicas)]
            for _ in range(primaries)
        ]
        cluster = Cluster(shards, node_timeout_ms)
        _assemble(shards)
        cluster.wait_healthy()
        wait_until(
            lambda: all(_replica_linked(r) for shard in shards for r in shard[1:]),
            "every replica to sync",
        )
        yield cluster


# --------------------------------------------------------------------------- sentinel


@dataclass
class SentinelGroup:
    """A primary, its replicas and the Sentinels watching them under service name `service`."""

    servers: list[RunningServer]
    sentinels: list[RunningServer]
    service: str = SERVICE
    down_after_ms: int = 1000
    _dirs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A `redis+sentinel://` URL listing every Sentinel, with the service name as path."""
        hosts = ",".join(f"{s.host}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [(s.host, s.port) for s in self.sentinels]

    def primary(self) -> RunningServer:
        """The server the Sentinels currently name as primary."""
        for sentinel in self.sentinels:
            if not sentinel.running:
                continue
            with contextlib.suppress(redis.RedisError, OSError), sentinel.client(socket_timeout=2) as c:
                host, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                return next(s for s in self.servers if (s.host, s.port) == (_text(host), int(port)))
        raise LookupError(f"no Sentinel answers for service {self.service!r}")

    def wait_ready(self, replicas: int, timeout: float = READY_TIMEOUT) -> None:
        """Every Sentinel sees the others and `replicas` replicas of the current primary."""

        def ready(sentinel: RunningServer) -> bool:
            with sentinel.client(socket_timeout=2) as c:
                state = c.sentinel_master(self.service)  # parsed by redis-py, flags as booleans
            return bool(
                int(state["num-other-sentinels"]) == len(self.sentinels) - 1
                and int(state["num-slaves"]) >= replicas
                and not state["is_odown"]
                and not state["is_sdown"]
            )

        wait_until(lambda: all(ready(s) for s in self.sentinels), "Sentinels to agree", timeout)


def _sentinel_config(path: Path, port: int, primary: RunningServer, group: SentinelGroup) -> None:
    quorum = len(group.sentinels) // 2 + 1 if group.sentinels else 2
    path.write_text(
        "\n".join(
            [
                f"port {port}",
                f"bind {HOST}",
                f"dir {path.parent}",
                f"sentinel monitor {group.service} {primary.host} {primary.port} {quorum}",
                f"sentinel down-after-milliseconds {group.service} {group.down_after_ms}",
                f"sentinel failover-timeout {group.service} 10000",
                f"sentinel parallel-syncs {group.service} 2",
                "",
            ]
        )
    )


def _start_sentinel(kind: str, primary: RunningServer, group: SentinelGroup, count: int) -> RunningServer:
    """One `<server> <conf> --sentinel` process, run by the same executor as the servers."""
    binary = locate(kind)
    data_dir = Path(tempfile.mkdtemp(prefix="conveyor-sentinel-"))
    group._dirs.append(data_dir)
    for _ in range(3):  # a port picked as free can be taken before the process binds it
        port = _free_port()
        conf = data_dir / "sentinel.conf"
        _sentinel_config(conf, port, primary, _with_quorum(group, count))
        srv = RunningServer(
            get_kind(kind), config="sentinel", binary=binary, flags=[str(conf), "--sentinel"],
            port=port, data_dir=data_dir, mode="sentinel", threads=None, timeout=30.0,
        )  # fmt: skip
        try:
            srv.start()
        except ServerStartError:
            continue
        return srv
    raise ServerStartError(f"{kind}: Sentinel did not start after 3 ports")


def _with_quorum(group: SentinelGroup, count: int) -> SentinelGroup:
    """The group as `_sentinel_config` should see it: `count` Sentinels in the end."""
    return SentinelGroup(group.servers, [group.servers[0]] * count, group.service, group.down_after_ms)


@contextlib.contextmanager
def start_sentinel_group(
    kind: str = "valkey-9.1", replicas: int = 2, sentinels: int = 3, down_after_ms: int = 1000
) -> Iterator[SentinelGroup]:
    """Start a primary, `replicas` replicas and `sentinels` Sentinels; yield; stop everything."""
    with contextlib.ExitStack() as stack:
        primary = stack.enter_context(start_server(kind))
        servers = [primary]
        for _ in range(replicas):
            args = ["--replicaof", primary.host, str(primary.port)]
            servers.append(stack.enter_context(start_server(kind, extra_args=args)))
        group = SentinelGroup(servers, [], down_after_ms=down_after_ms)
        stack.callback(lambda: [shutil.rmtree(d, ignore_errors=True) for d in group._dirs])
        wait_until(lambda: all(_replica_linked(r) for r in servers[1:]), "replicas to sync")
        for _ in range(sentinels):
            sentinel = _start_sentinel(kind, primary, group, sentinels)
            stack.callback(sentinel.stop)
            group.sentinels.append(sentinel)
        group.wait_ready(replicas)
        yield group
