"""What Queue and AsyncQueue share besides I/O: construction, settings and command lists."""

from __future__ import annotations

import codecs
import copy
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Generic, TypeVar

from redis import exceptions as redis_errors

from ._connection import translate_error
from ._errors import ConnectionFailedError, QueueClosedError, ReplicationError
from ._glide_common import closed_in_flight
from ._models import MAX_PRIORITY, Job, JobSpec, QueueSettings
from ._ops import LAYOUT_VERSION, Call, QueueCore
from ._results import client_options
from ._serialize import JSONSerializer, Serializer
from ._topology import is_cluster, node_of, where

# What redis-py raises: RedisClusterException (no usable node, keys across slots) is not a RedisError.
REDIS_ERRORS = (redis_errors.RedisError, redis_errors.RedisClusterException)
# What an AsyncQueue call may also meet. RuntimeError: asyncio's "Event loop is closed", on a
# connection of an earlier loop (AsyncQueue._error); QueueClosedError: glide's client's, for a call
# aclose() cut off, which _error words for a read.
ASYNC_ERRORS = (*REDIS_ERRORS, RuntimeError, QueueClosedError)

# Writes that create or settle jobs; with wait_replicas they return only once replicated.
DURABLE_SCRIPTS = frozenset({"enqueue", "ack", "fail"})
# Scripts that only read: their first call checks the layout without writing it (see _queue_startup).
READ_ONLY_SCRIPTS = frozenset({"waiting_page", "read_results"})


def writes(call: Call[Any]) -> bool:
    """Whether ``call`` may write the queue's keys (its startup check may then write the version)."""
    return call.script.name not in READ_ONLY_SCRIPTS


ClientT = TypeVar("ClientT")


def resolve_settings(settings: QueueSettings | None, overrides: dict[str, Any]) -> QueueSettings:
    """Settings given as an object, keyword overrides, or both (overrides win)."""
    if settings is not None and not isinstance(settings, QueueSettings):
        # a dict here failed in dataclasses.replace, naming neither the argument nor what it needs
        raise TypeError(
            f"settings must be a conveyor.QueueSettings (or give them as keyword arguments), "
            f"got {type(settings).__name__}"
        )
    return replace(settings or QueueSettings(), **overrides)


def check_encoding(client: Any) -> None:
    """Refuse a redis-py client whose encoding is not UTF-8. Conveyor reads replies as UTF-8 and
    stores payloads as UTF-8: with another encoding a decoded payload 'Zoë' came back 'ZoÃ«', and a
    task name sent in it could not be read back."""
    encoding = client_options(client).get("encoding") or "utf-8"
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except (LookupError, TypeError):
        utf8 = False
    if not utf8:
        raise ValueError(
            f"the client's encoding {encoding!r} is not UTF-8: Conveyor stores payloads, task names "
            "and ids as UTF-8, and text in another encoding comes back corrupted; build the client "
            "with encoding='utf-8' (redis-py's default)"
        )


def check_decoding(client: Any, serializer: Serializer) -> None:
    """Refuse a redis-py client that decodes replies with a serializer other than JSON. The
    client's reply parser decodes every payload it reads as UTF-8: a pickle or msgpack payload
    was enqueued, then every claim, get_job and result raised a bare UnicodeDecodeError. Only
    Conveyor's JSON serializer is known to write UTF-8 text (a worker's own connections read bytes)."""
    if client_options(client).get("decode_responses") and not isinstance(serializer, JSONSerializer):
        raise ValueError(
            f"the client decodes replies (decode_responses=True) but the serializer "
            f"{type(serializer).__name__} may write payloads that are not UTF-8 text, which the "
            "client then fails to read; build the client with decode_responses=False (Conveyor "
            "reads bytes) or use the JSON serializer"
        )


class QueueBase(Generic[ClientT]):
    """A named queue bound to a client; the twins add the I/O."""

    def __init__(
        self, name: str, client: ClientT, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> None:
        check_encoding(client)
        self.core = QueueCore(name, resolve_settings(settings, overrides))
        check_decoding(client, self.core.settings.serializer)
        self.core.owner = self
        self.client = client
        self._ready = False
        # The eviction policy was read (and warned about) once: a read of a queue without a layout
        # version checks again at its next call, but its warning repeated at every read.
        self._policy_checked = False
        self._cluster = is_cluster(client)
        self._peers: dict[str, QueueCore] = {}  # other queues enqueued into via enqueue_many_to
        self._checked: set[str] = set()  # queues whose layout version was checked
        # Bumped as close() / aclose() starts and as it ends (odd while one runs): a call that read
        # another value when it started, or that fails while a close runs, met it (see ``_error``).
        self._closes = 0
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

    def _error(self, exc: BaseException, closes: int, read_only: bool = False) -> Exception:
        """Conveyor's error for ``exc``, raised by a call that started when ``_closes`` was
        ``closes``. A connection lost while close() / aclose() ran (redis-py closes the connections
        of calls in flight) is QueueClosedError: the call may have been applied, and 'cannot reach
        the server' (ConnectionFailedError) is neither true nor something to retry. ``read_only``:
        the call only reads, and a timeout's or a close's message says that nothing was changed."""
        if isinstance(exc, QueueClosedError):  # glide's own (its client knows no read from a write)
            return closed_in_flight(where(self.client), read_only) if exc.maybe_applied else copy.copy(exc)
        pool: Any = getattr(self.client, "connection_pool", None)
        size = getattr(pool, "max_connections", None)
        error = translate_error(where(self.client), exc, size, read_only)
        if (closes != self._closes or self._closes % 2) and isinstance(error, ConnectionFailedError):
            return closed_in_flight(where(self.client), read_only)
        return error

    def _queue_startup(self, pipe: Any, write: bool = True) -> None:
        """Layout version check and eviction policy read, sent as one pipeline. ``write`` False (a
        read-only script's call): the version is read, not set, so reading a queue that does not
        exist leaves no key (and the version is read again with the next call; the policy only once).

        The policy is read from INFO (``maxmemory_policy``, and Dragonfly's ``cache_mode``), which
        every server reports; Dragonfly answers CONFIG GET maxmemory-policy with nothing. A cluster
        pipeline only carries keyed commands: there CONFIG GET is sent on its own, to the queue's
        slot owner (see ``_policy_target``).
        """
        if write:
            pipe.hsetnx(self.core.keys.meta, "v", LAYOUT_VERSION)
        else:
            pipe.hget(self.core.keys.meta, "v")  # (keeps the replies' places)
        pipe.hget(self.core.keys.meta, "v")
        if not self._cluster and not self._policy_checked:
            pipe.info()  # default sections: where Dragonfly puts the field is not documented

    def _policy_target(self) -> dict[str, Any]:
        return node_of(self.client, self.core.keys.meta)

    def _fan_out(
        self, batches: Mapping[str, Iterable[JobSpec | tuple[str, Any]]]
    ) -> tuple[list[QueueCore], list[Call[list[Job]]]]:
        """The queues of ``batches`` given jobs (this queue's settings) and their enqueue calls,
        all validated: a queue given an empty batch has no call (its name is still checked)."""
        cores, calls = [], []
        for name, specs in batches.items():
            core, batch = self.core if name == self.name else self._peer(name), list(specs)
            if batch:
                cores.append(core)
                calls.append(core.enqueue(batch))
        return cores, calls

    def _peer(self, name: str) -> QueueCore:
        if name not in self._peers:
            self._peers[name] = core = QueueCore(name, self.core.settings)
            core.owner = name  # no client of that queue here: its jobs' result() names the queue
        return self._peers[name]

    def _unchecked(self, cores: list[QueueCore], pipe: Any) -> list[QueueCore]:
        """Queue the layout check of queues not checked yet on ``pipe``; return those queues."""
        self._checked.add(self.name)  # checked with the server itself (``_ready``)
        todo = [core for core in cores if core.name not in self._checked]
        for core in todo:
            pipe.hsetnx(core.keys.meta, "v", LAYOUT_VERSION)
            pipe.hget(core.keys.meta, "v")
        return todo

    def _layouts_checked(self, todo: list[QueueCore], replies: list[Any]) -> None:
        for core, stored in zip(todo, replies[1::2], strict=True):
            core.check_layout(stored)
            self._checked.add(core.name)

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

    def _queue_read(self, pipe: Any, command: str, *args: Any) -> None:
        """A read of the queue's keys, and its layout version in the same round trip (one slot:
        both keys share the queue's hash tag). ``_checked_read`` gives the read's reply."""
        getattr(pipe, command)(*args)
        pipe.hget(self.core.keys.meta, "v")

    def _checked_read(self, replies: list[Any]) -> Any:
        """The reply of ``_queue_read`` once its layout version is known: a queue of a newer layout
        is refused (SchemaVersionError) as by every script call, never read with this layout's
        keys and fields. Read, not set: reading a queue that does not exist writes nothing. Sent
        with ``raise_on_error=False``: an error reply is raised as the lone command raised it
        (not named as a pipeline's command # N)."""
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        self.core.check_layout(replies[1])
        return replies[0]

    def _queue_counts(self, pipe: Any) -> None:
        k = self.core.keys
        for level in range(MAX_PRIORITY + 1):
            pipe.llen(k.level(level))
        for key in (k.delayed, k.active, k.completed, k.failed):
            pipe.zcard(key)
        pipe.hmget(k.meta, ["completed", "failed", "v"])  # v: the layout version, checked
        pipe.zcard(k.cancelled)
        pipe.get(k.parked)
