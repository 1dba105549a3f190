"""What Queue and AsyncQueue share besides I/O: construction, settings and command lists."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Generic, TypeVar

from redis import exceptions as redis_errors

from ._connection import translate_error
from ._errors import ConveyorError, ReplicationError
from ._models import MAX_PRIORITY, QueueSettings
from ._ops import LAYOUT_VERSION, Call, QueueCore
from ._topology import is_cluster, node_of, where

# What redis-py raises: RedisClusterException (no usable node, keys across slots) is not a RedisError.
REDIS_ERRORS = (redis_errors.RedisError, redis_errors.RedisClusterException)

# Writes that create or settle jobs; with wait_replicas they return only once replicated.
DURABLE_SCRIPTS = frozenset({"enqueue", "ack", "fail"})

ClientT = TypeVar("ClientT")


def resolve_settings(settings: QueueSettings | None, overrides: dict[str, Any]) -> QueueSettings:
    """Settings given as an object, keyword overrides, or both (overrides win)."""
    return replace(settings or QueueSettings(), **overrides)


class QueueBase(Generic[ClientT]):
    """A named queue bound to a client; the twins add the I/O."""

    def __init__(
        self, name: str, client: ClientT, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> None:
        self.core = QueueCore(name, resolve_settings(settings, overrides))
        self.client = client
        self._ready = False
        self._cluster = is_cluster(client)
        if self._cluster and self.core.settings.wait_replicas:
            raise ConveyorError(
                "wait_replicas is not supported on Redis Cluster yet (WAIT must follow the write on "
                "the same connection to the slot owner); use Sentinel or leave it at 0"
            )
        self._no_client_retries()

    def _no_client_retries(self) -> None:
        """Turn redis-py's client-side retries off on this client (each twin sets its Retry).

        A script call re-sent after a socket timeout can run twice on the server (the first one
        may have run; only its reply was lost): a re-sent enqueue_many stored its batch twice and
        reported success. Conveyor retries only where a re-sent call is safe (a worker's
        ack+claim carries a request id), so the client itself must never re-send.
        """
        raise NotImplementedError

    def _set_retry(self, retry: Any) -> None:
        client: Any = self.client
        try:
            client.set_retry(retry)
        except AttributeError:
            # redis-py's BlockingConnectionPool.set_retry reads attributes it does not have: set
            # it for the connections the pool creates from now on (it creates them lazily).
            pool = getattr(client, "connection_pool", None)
            if pool is not None:
                pool.connection_kwargs["retry"] = retry

    @property
    def name(self) -> str:
        return self.core.name

    @property
    def settings(self) -> QueueSettings:
        return self.core.settings

    def _error(self, exc: BaseException) -> Exception:
        pool: Any = getattr(self.client, "connection_pool", None)
        return translate_error(where(self.client), exc, getattr(pool, "max_connections", None))

    def _queue_startup(self, pipe: Any) -> None:
        """Layout version check and eviction policy read, sent as one pipeline.

        The policy is read from INFO (``maxmemory_policy``, and Dragonfly's ``cache_mode``), which
        every server reports; Dragonfly answers CONFIG GET maxmemory-policy with nothing. A cluster
        pipeline only carries keyed commands: there CONFIG GET is sent on its own, to the queue's
        slot owner (see ``_policy_target``).
        """
        pipe.hsetnx(self.core.keys.meta, "v", LAYOUT_VERSION)
        pipe.hget(self.core.keys.meta, "v")
        if not self._cluster:
            pipe.info()  # default sections: where Dragonfly puts the field is not documented

    def _policy_target(self) -> dict[str, Any]:
        return node_of(self.client, self.core.keys.meta)

    def _durable(self, call: Call[Any]) -> bool:
        """Whether this call must be followed by WAIT (opt-in, for the writes that settle jobs)."""
        return self.core.settings.wait_replicas > 0 and call.script.name in DURABLE_SCRIPTS

    def _wait_args(self) -> tuple[Any, ...]:
        s = self.core.settings
        return ("WAIT", s.wait_replicas, max(1, round(s.wait_timeout * 1000)))

    def _check_replicas(self, acked: Any) -> None:
        wanted = self.core.settings.wait_replicas
        if int(acked) < wanted:
            raise ReplicationError(
                f"only {int(acked)} of {wanted} replicas confirmed the write to queue {self.name!r} "
                f"within {self.core.settings.wait_timeout} s ({where(self.client)})"
            )

    def _queue_counts(self, pipe: Any) -> None:
        k = self.core.keys
        for level in range(MAX_PRIORITY + 1):
            pipe.llen(k.level(level))
        for key in (k.delayed, k.active, k.completed, k.failed):
            pipe.zcard(key)
        pipe.hmget(k.meta, ["completed", "failed"])
