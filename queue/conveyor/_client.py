"""Queue: the synchronous client. Every method builds a Call in QueueCore and executes it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import redis
from redis import exceptions as redis_errors
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._base import REDIS_ERRORS, resolve_settings, writes
from ._batching import IN_FLIGHT, EnqueueBatcher
from ._connection import check_policy, lost_replicas
from ._direct import DirectScripts, HeldScripts
from ._errors import ReplicationError
from ._grouped import REMAP_ERRORS, Rounds
from ._models import Job, JobSpec, Limit, QueueSettings
from ._ops import Call, release_flags
from ._queue_admin import QueueAdmin
from ._replies import settle_single
from ._result_wait import SyncResults
from ._results import result_values
from ._scripts import is_noscript
from ._sweeps import promote_call, recover_call, trim_call
from ._topology import SYNC, ask_for_primary, connect

T = TypeVar("T")


class Queue(QueueAdmin):
    """A queue on a Redis-compatible server, used from synchronous code.

    Given a client (``Queue(name, client)``), Conveyor turns that client's own retries off
    (``set_retry``), because a command re-sent after a timeout may run twice. Give Conveyor a
    client of its own if other code needs retries. A call that times out (``TimeoutError`` or
    [ConnectionFailedError][conveyor.ConnectionFailedError]) may or may not have run on the server:
    enqueue with caller-given ``job_id`` values and re-send the same call, which is then idempotent.
    """

    @classmethod
    def from_url(
        cls, url: str, name: str, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> Queue:
        """A queue with its own connection pool (``pool_size`` connections per server).

        ``url`` names one server (``redis://``, ``rediss://``, ``unix://``), a Cluster
        (``redis+cluster://h1:p1,h2:p2``) or Sentinels and their service
        (``redis+sentinel://h1:p1,h2:p2/service``).
        """
        resolved = resolve_settings(settings, overrides)
        return cls(name, connect(SYNC, url, resolved), settings=resolved)

    def _no_client_retries(self) -> None:
        self._set_retry(Retry(NoBackoff(), 0))

    def __init__(
        self, name: str, client: redis.Redis, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> None:
        super().__init__(name, client, settings=settings, **overrides)
        self._direct = DirectScripts.of(client)  # None: every call goes through client.evalsha
        self._held = HeldScripts.of(client)  # one held connection, in a roomy pool (see _run)
        self._results = SyncResults(self)
        self._batcher = EnqueueBatcher(self.core, self._run, min(IN_FLIGHT, self.settings.pool_size))

    # -- execution --------------------------------------------------------------------------------
    def _evalsha(self, call: Call[Any], direct: DirectScripts | None) -> Any:
        script = call.script
        try:
            return self._send(call, direct)
        except (redis_errors.ResponseError, ReplicationError) as exc:
            self._follow_primary(exc)
            if not is_noscript(exc):
                raise
        self.client.script_load(script.source)
        return self._send(call, direct)

    def _follow_primary(self, exc: BaseException) -> None:
        """After a write the primary could not replicate, ask the Sentinels whether it was
        replaced (see ``ask_for_primary``): the next call then goes to the new one."""
        if lost_replicas(exc):
            with contextlib.suppress(*REDIS_ERRORS):
                ask_for_primary(self.client)

    def _send(self, call: Call[Any], direct: DirectScripts | None) -> Any:
        keys = call.keys
        if not self._durable(call):
            if direct is not None:
                return direct.evalsha(call.script.sha, keys, call.args)
            return self.client.evalsha(call.script.sha, len(keys), *keys, *call.args)
        return self._send_grouped([call], durable=True)[0]

    def _send_grouped(self, calls: Sequence[Call[Any]], durable: bool) -> list[Any]:
        """One pipeline per node serving the calls' queues, each followed by WAIT if ``durable``."""
        rounds = Rounds(calls, self._wait_args() if durable else None, self._check_replicas)
        while rounds.another():
            for node, items in rounds.groups(self.client):
                try:
                    rounds.settle(items, self._pipeline_on(node, rounds.commands(items)))
                except REMAP_ERRORS:
                    self._remap()
                    raise
            if rounds.remap:
                self._remap()
            for script in rounds.scripts_to_load():
                self.client.script_load(script.source)
            if rounds.done:
                return rounds.replies()
            if pause := rounds.pause():  # a TRYAGAIN: the slot's keys are moving
                time.sleep(pause)
        raise rounds.gave_up()

    def _pipeline_on(self, node: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        client: Any = self.client if node is None else self.client.get_redis_connection(node)  # type: ignore[attr-defined]
        pipe = client.pipeline(transaction=False)
        for args in commands:
            pipe.execute_command(*args)
        return list(pipe.execute(raise_on_error=False))

    def _remap(self) -> None:
        """Read the slot map again (Cluster only) after a redirection or a lost node."""
        if self._cluster:
            with contextlib.suppress(*REDIS_ERRORS):
                self.client.nodes_manager.initialize()  # type: ignore[attr-defined]

    def _run(self, call: Call[T]) -> T:
        """One script call: on the held connection unless another thread is using it (or the pool
        is too small to hold one), else on a connection from the pool."""
        held = self._held
        if held is not None and held.take():
            try:
                return self._run_on(call, held)
            finally:
                held.give()
        return self._run_on(call, self._direct)

    def _run_on(self, call: Call[T], direct: DirectScripts | None) -> T:
        closes = self._closes  # see _error
        try:
            if not self._ready:
                self._check_server(writes(call))
            return call.parse(self._evalsha(call, direct))
        except REDIS_ERRORS as exc:
            raise self._error(exc, closes, not writes(call)) from exc

    def _check_server(self, write: bool = True) -> None:
        pipe = self.client.pipeline(transaction=False)
        self._queue_startup(pipe, write)
        replies = pipe.execute(raise_on_error=False)
        if isinstance(replies[1], Exception):
            raise replies[1]
        self.core.check_layout(replies[1])
        if not self._policy_checked:
            policy = replies[2] if len(replies) > 2 else None
            if self._cluster:
                policy = self.client.config_get("maxmemory-policy", **self._policy_target())
            check_policy(self.settings, policy)  # strict: raises, and checks again next call
            self._policy_checked = True
        self._ready = write or replies[1] is not None  # a read of a queue without its version: again

    # -- public API ----------------------------------------------------------------------------------
    def enqueue(
        self,
        task: str,
        payload: Any = None,
        *,
        job_id: str | None = None,
        delay: float = 0.0,
        max_attempts: int | None = None,
        priority: int = 0,
        time_limit: float | None = None,
        limit: Limit | None = None,
    ) -> Job:
        """Enqueue one job. With ``job_id``, an existing job of that id is returned instead.
        ``priority`` (0..9, default 0): higher levels are claimed first, FIFO within a level.
        ``time_limit`` (seconds) bounds each attempt (default: the queue's ``time_limit``).
        ``limit``: per-key concurrency and rate limits ([Limit][conveyor.Limit])."""
        group = self.core.pack(task, payload, job_id, delay, max_attempts, priority=priority,
                               time_limit=time_limit, limit=limit)  # fmt: skip
        if self.settings.batch_enqueue:
            return self._batcher.enqueue(group)
        return (self._run(self.core.enqueue_packed((group,))))[0]

    def enqueue_many(self, specs: Iterable[JobSpec | tuple[str, Any]]) -> list[Job]:
        """Enqueue up to 1000 jobs in one script call; all are validated before anything is sent.
        An empty batch sends nothing and returns []."""
        batch = list(specs)
        return (self._run(self.core.enqueue(batch))) if batch else []

    def enqueue_many_to(
        self, batches: Mapping[str, Iterable[JobSpec | tuple[str, Any]]]
    ) -> dict[str, list[Job]]:
        """Enqueue into several queues (this queue's settings) in one round trip per shard.

        ``batches`` maps queue names to up to 1000 specs each; all are validated before anything
        is sent. Each queue's batch is one script call, atomic on its own; on an error some queues
        may already hold their jobs, so give ``job_id`` values and re-send the same call.
        """
        closes = self._closes  # see _error
        cores, calls = self._fan_out(batches)
        out: dict[str, list[Job]] = {name: [] for name in batches}  # an empty batch: nothing sent
        if not calls:
            return out
        try:
            if not self._ready:
                self._check_server()
            pipe = self.client.pipeline(transaction=False)
            if todo := self._unchecked(cores, pipe):
                self._layouts_checked(todo, pipe.execute())
            replies = self._send_grouped(calls, durable=self.settings.wait_replicas > 0)
        except (*REDIS_ERRORS, ReplicationError) as exc:
            self._follow_primary(exc)
            if isinstance(exc, ReplicationError):
                raise
            raise self._error(exc, closes) from exc
        for core, call, reply in zip(cores, calls, replies, strict=True):
            out[core.name] = call.parse(reply)
        return out

    def claim(self, count: int = 1, lease: float | None = None) -> list[Job]:
        """Lease up to ``count`` waiting jobs (due delayed jobs are promoted first)."""
        return self._run(self.core.claim(count, lease))[0]

    def ack(self, job: Job, claim: int = 0, lease: float | None = None, *, result: Any = None) -> list[Job]:
        """Complete ``job`` and, in the same call, lease up to ``claim`` next jobs. With
        ``store_results``, ``result`` is stored as the job's result."""
        values = result_values(self.settings, job, result)
        statuses, claimed, _ = self._run(self.core.ack([job], claim, lease, results=values))
        if statuses[0] != 1 and claimed:
            self.release(claimed)
        settle_single("ack", job, statuses, "completed")
        return claimed

    def fail(self, job: Job, error: str | BaseException, retry: bool = True) -> str:
        """Record a failed attempt; returns the outcome: 'retry' (backoff through the delayed set),
        'failed', or 'cancelled' when a cancel of the job was requested while it ran."""
        return self._run(self.core.fail(job, error, retry))

    def extend(self, job: Job, lease: float | None = None) -> None:
        """Push the job's lease deadline to now + ``lease`` (heartbeat). If a cancel of the job was
        requested, ``job.cancelled`` turns True: stop, then ``fail`` settles it as cancelled. Past
        its time limit the lease is not renewed: [LeaseLostError][conveyor.LeaseLostError]."""
        settle_single("extend", job, self._run(self.core.extend([job], lease)), "")

    def release(self, jobs: Sequence[Job], started: bool = False) -> list[int]:
        """Give leased jobs back to the front of the queue; unstarted jobs get their attempt back. A
        job whose cancel was requested ends cancelled instead, and a started job (``started=True``)
        on its last attempt ends failed (given back, it would run beyond ``max_attempts``). Per
        job: 1 released, 2 ended cancelled, 3 ended failed, 0 the lease is no longer held, -2 no
        such job."""
        flags = release_flags(jobs, started)
        return self._run(self.core.release(jobs, flags)) if jobs else []

    def promote(self, batch: int | None = None) -> int:
        """Move up to ``batch`` due delayed jobs to the waiting list."""
        return self._run(promote_call(self.core, batch))

    def recover(self, batch: int | None = None) -> tuple[int, int]:
        """Settle up to ``batch`` expired leases: (redelivered, ended failed for lack of attempts or
        cancelled)."""
        return self._run(recover_call(self.core, batch))

    def trim(self, batch: int | None = None) -> int:
        """Apply retention to completed, failed and cancelled jobs, at most ``batch`` removals per
        set (expired result records and deduplication entries too); returns how many jobs it removed."""
        return self._run(trim_call(self.core, batch))

    def result(self, job_id: str, timeout: float | None = None) -> Any:
        """The return value of job ``job_id``, waiting up to ``timeout`` seconds (None: no limit)
        without polling. Needs ``store_results``. Raises [JobFailedError][conveyor.JobFailedError]
        (with the stored error and attempts) if the job failed (also when its last attempt timed out:
        the error names the time limit), [JobCancelledError][conveyor.JobCancelledError] if it ended
        cancelled, ``TimeoutError`` if it has not finished in time, and
        [ConveyorError][conveyor.ConveyorError] if its result is gone (expired, trimmed, or never
        stored)."""
        return self._results.wait(job_id, timeout)

    def cancel(self, job_id: str) -> bool:
        """Cancel a job: a waiting or delayed job is removed; an active one is marked, and the
        worker holding it stops its handler at its next heartbeat (within a third of the lease)
        and settles it as ``cancelled`` (so does lease recovery if that worker is gone). True in
        both cases; False if the job is finished or unknown."""
        return self._run(self.core.cancel(job_id))

    def close(self) -> None:
        """Close the client and its pool (and stop waiting for results).

        A call still in flight in another thread either completes or, with redis-py (which closes
        its connection), raises [QueueClosedError][conveyor.QueueClosedError] with
        ``maybe_applied`` True: it may have been applied or not (repeat an enqueue only with a
        ``job_id``), or ``maybe_applied`` False for a read (counts, get_job, jobs: nothing was
        changed); never ConnectionFailedError. Such a call may take up to ``socket_timeout`` to
        raise: a thread just entering its read as its socket is closed can wait on the closed
        descriptor's number, already reused by another connection (CPython's sockets give no way
        to close a socket another thread reads without that race). glide's close() waits for such
        calls to complete.
        A call made after ``close()`` opens a new connection with redis-py; with glide it raises
        QueueClosedError, ``maybe_applied`` False (nothing was sent)."""
        self._closes += 1
        try:
            self._results.close()
            if self._held is not None:
                self._held.close()
            self.client.close()
        finally:
            self._closes += 1
