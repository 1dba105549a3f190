"""AsyncQueue: the asyncio twin of Queue. Every method builds a Call in QueueCore and awaits it."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import redis.asyncio as aredis
from redis import exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ._base import ASYNC_ERRORS, REDIS_ERRORS, resolve_settings, writes
from ._batching import IN_FLIGHT, AsyncEnqueueBatcher
from ._connection import check_policy, lost_replicas
from ._direct import AsyncDirectScripts, AsyncHeldScripts, AsyncLoneScripts
from ._errors import ConveyorError, ReplicationError
from ._grouped import REMAP_ERRORS, NodeCommand, Rounds
from ._models import Job, JobSpec, Limit, QueueSettings
from ._ops import Call, release_flags
from ._queue_admin import AsyncQueueAdmin
from ._replies import settle_single
from ._result_wait import AsyncResults
from ._results import result_values
from ._scripts import is_noscript
from ._sweeps import promote_call, recover_call, trim_call
from ._topology import ASYNC, ask_for_primary, connect

T = TypeVar("T")


class AsyncQueue(AsyncQueueAdmin):
    """A queue on a Redis-compatible server, used from asyncio code.

    Given a client (``AsyncQueue(name, client)``), Conveyor turns that client's own retries off
    (``set_retry``), because a command re-sent after a timeout may run twice. Give Conveyor a
    client of its own if other code needs retries. A call that times out (``TimeoutError`` or
    [ConnectionFailedError][conveyor.ConnectionFailedError]) may or may not have run on the server:
    enqueue with caller-given ``job_id`` values and re-send the same call, which is then idempotent.

    An ``AsyncQueue`` belongs to the event loop it first runs on (redis-py's rule for asyncio
    clients): create one per loop, for example inside the coroutine given to ``asyncio.run()``.
    A call made on another loop (for example after that loop closed) raises a ConveyorError saying
    so, before anything is sent.
    """

    @classmethod
    def from_url(
        cls, url: str, name: str, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> AsyncQueue:
        """A queue with its own connection pool (``pool_size`` connections per server).

        ``url`` names one server (``redis://``, ``rediss://``, ``unix://``), a Cluster
        (``redis+cluster://h1:p1,h2:p2``) or Sentinels and their service
        (``redis+sentinel://h1:p1,h2:p2/service``).
        """
        resolved = resolve_settings(settings, overrides)
        return cls(name, connect(ASYNC, url, resolved), settings=resolved)

    def _no_client_retries(self) -> None:
        self._set_retry(Retry(NoBackoff(), 0))

    def __init__(
        self, name: str, client: aredis.Redis, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> None:
        super().__init__(name, client, settings=settings, **overrides)
        self._direct: AsyncDirectScripts | None = AsyncDirectScripts.of(client)  # None: client.evalsha
        self._lone = AsyncLoneScripts.of(client)  # one held connection, in a roomy pool (see _run)
        self._results = AsyncResults(self)
        self._batcher = AsyncEnqueueBatcher(self.core, self._run, min(IN_FLIGHT, self.settings.pool_size))
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None  # the loop of the first call

    def _own_loop(self) -> None:
        """Refuse a call made on another event loop than the first call's, before anything is sent.
        A connection of a closed loop still wrote the call (the server ran it) and then failed to
        read the reply, so a write that raised had been applied; the next call, on a new
        connection, ran as usual."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = weakref.ref(loop)
        elif self._loop() is not loop:
            raise other_loop_error(self.name, self._loop())

    def _hold_connection(self) -> None:
        """For one caller at a time (a worker's pump): script calls keep their connection checked
        out between calls, until ``_put_back()`` (see ``_direct.AsyncHeldScripts``)."""
        if self._direct is not None:
            self._direct = AsyncHeldScripts.of(self.client)

    async def _put_back(self) -> None:
        """Return a connection kept by ``hold_connection`` to the pool."""
        if self._direct is not None:
            await self._direct.put_back()

    def _error(self, exc: BaseException, closes: int, read_only: bool = False) -> Exception:
        if isinstance(exc, RuntimeError):  # asyncio's, met on a connection of an earlier loop
            return closed_loop_error(self.name) if "Event loop is closed" in str(exc) else exc
        return super()._error(exc, closes, read_only)

    # -- execution --------------------------------------------------------------------------------
    async def _evalsha(self, call: Call[Any], direct: AsyncDirectScripts | None) -> Any:
        script = call.script
        try:
            return await self._send(call, direct)
        except (redis_errors.ResponseError, ReplicationError) as exc:
            await self._follow_primary(exc)
            if not is_noscript(exc):
                raise
        await self.client.script_load(script.source)
        return await self._send(call, direct)

    async def _follow_primary(self, exc: BaseException) -> None:
        """As the sync twin's: after a write the primary could not replicate, ask the Sentinels."""
        if lost_replicas(exc) and (asked := ask_for_primary(self.client)) is not None:
            with contextlib.suppress(*REDIS_ERRORS):
                await asked

    async def _send(self, call: Call[Any], direct: AsyncDirectScripts | None) -> Any:
        keys = call.keys
        if not self._durable(call):
            if direct is not None:
                return await direct.evalsha(call.script.sha, keys, call.args)
            return await self.client.evalsha(call.script.sha, len(keys), *keys, *call.args)
        await self._put_back()  # the pipeline takes a connection of the pool
        return (await self._send_grouped([call], durable=True))[0]

    async def _send_grouped(self, calls: Sequence[Call[Any]], durable: bool) -> list[Any]:
        """One pipeline per node serving the calls' queues (concurrently), WAIT after each if ``durable``."""
        rounds = Rounds(calls, self._wait_args() if durable else None, self._check_replicas)
        while rounds.another():
            groups = rounds.groups(self.client)
            sent = [self._pipeline_on(node, rounds.commands(items)) for node, items in groups]
            try:
                for (_, items), replies in zip(groups, await asyncio.gather(*sent), strict=True):
                    rounds.settle(items, replies)
            except REMAP_ERRORS:
                await self._remap()
                raise
            if rounds.remap:
                await self._remap()
            for script in rounds.scripts_to_load():
                await self.client.script_load(script.source)
            if rounds.done:
                return rounds.replies()
            if pause := rounds.pause():  # a TRYAGAIN: the slot's keys are moving
                await asyncio.sleep(pause)
        raise rounds.gave_up()

    async def _pipeline_on(self, node: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
        if node is None:
            pipe = self.client.pipeline(transaction=False)
            for args in commands:
                pipe.execute_command(*args)
            return list(await pipe.execute(raise_on_error=False))
        sent = [NodeCommand(args) for args in commands]
        await node.execute_pipeline(sent)  # one connection to that node, replies (or errors) in order
        return [command.result for command in sent]

    async def _remap(self) -> None:
        """Read the slot map again (Cluster only) after a redirection or a lost node."""
        if self._cluster:
            with contextlib.suppress(*REDIS_ERRORS):
                await self.client.nodes_manager.initialize()  # type: ignore[attr-defined]

    async def _run(self, call: Call[T]) -> T:
        """One script call: on the held connection unless another task is using it (or the pool is
        too small to hold one), else on a connection from the pool."""
        self._own_loop()
        lone = self._lone
        if lone is not None and lone.take():
            try:
                return await self._run_on(call, lone)
            finally:
                lone.give()
        return await self._run_on(call, self._direct)

    async def _run_on(self, call: Call[T], direct: AsyncDirectScripts | None) -> T:
        closes = self._closes  # see _error
        try:
            if not self._ready:
                await self._check_server(writes(call))
            return call.parse(await self._evalsha(call, direct))
        except ASYNC_ERRORS as exc:
            raise self._error(exc, closes, not writes(call)) from exc

    async def _check_server(self, write: bool = True) -> None:
        pipe = self.client.pipeline(transaction=False)
        self._queue_startup(pipe, write)
        replies = await pipe.execute(raise_on_error=False)
        if isinstance(replies[1], Exception):
            raise replies[1]
        self.core.check_layout(replies[1])
        if not self._policy_checked:
            policy = replies[2] if len(replies) > 2 else None
            if self._cluster:
                policy = await self.client.config_get("maxmemory-policy", **self._policy_target())
            check_policy(self.settings, policy)  # strict: raises, and checks again next call
            self._policy_checked = True
        self._ready = write or replies[1] is not None  # a read of a queue without its version: again

    # -- public API ----------------------------------------------------------------------------------
    async def enqueue(
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
            self._own_loop()  # before the batcher, whose calls in flight belong to the first loop
            return await self._batcher.enqueue(group)
        return (await self._run(self.core.enqueue_packed((group,))))[0]

    async def enqueue_many(self, specs: Iterable[JobSpec | tuple[str, Any]]) -> list[Job]:
        """Enqueue up to 1000 jobs in one script call; all are validated before anything is sent.
        An empty batch sends nothing and returns []."""
        batch = list(specs)
        return (await self._run(self.core.enqueue(batch))) if batch else []

    async def enqueue_many_to(
        self, batches: Mapping[str, Iterable[JobSpec | tuple[str, Any]]]
    ) -> dict[str, list[Job]]:
        """Enqueue into several queues in one round trip per shard (see ``Queue.enqueue_many_to``)."""
        closes = self._closes  # see _error
        cores, calls = self._fan_out(batches)
        out: dict[str, list[Job]] = {name: [] for name in batches}  # an empty batch: nothing sent
        if not calls:
            return out
        self._own_loop()
        try:
            if not self._ready:
                await self._check_server()
            pipe = self.client.pipeline(transaction=False)
            if todo := self._unchecked(cores, pipe):
                self._layouts_checked(todo, await pipe.execute())
            replies = await self._send_grouped(calls, durable=self.settings.wait_replicas > 0)
        except (*ASYNC_ERRORS, ReplicationError) as exc:
            await self._follow_primary(exc)
            if isinstance(exc, ReplicationError):
                raise
            raise self._error(exc, closes) from exc
        for core, call, reply in zip(cores, calls, replies, strict=True):
            out[core.name] = call.parse(reply)
        return out

    async def claim(self, count: int = 1, lease: float | None = None) -> list[Job]:
        """Lease up to ``count`` waiting jobs (due delayed jobs are promoted first)."""
        return (await self._run(self.core.claim(count, lease)))[0]

    async def ack(
        self, job: Job, claim: int = 0, lease: float | None = None, *, result: Any = None
    ) -> list[Job]:
        """Complete ``job`` and, in the same call, lease up to ``claim`` next jobs. With
        ``store_results``, ``result`` is stored as the job's result."""
        values = result_values(self.settings, job, result)
        statuses, claimed, _ = await self._run(self.core.ack([job], claim, lease, results=values))
        if statuses[0] != 1 and claimed:
            await self.release(claimed)
        settle_single("ack", job, statuses, "completed")
        return claimed

    async def fail(self, job: Job, error: str | BaseException, retry: bool = True) -> str:
        """Record a failed attempt; returns the outcome: 'retry' (backoff through the delayed set),
        'failed', or 'cancelled' when a cancel of the job was requested while it ran."""
        return await self._run(self.core.fail(job, error, retry))

    async def extend(self, job: Job, lease: float | None = None) -> None:
        """Push the job's lease deadline to now + ``lease`` (heartbeat). If a cancel of the job was
        requested, ``job.cancelled`` turns True: stop, then ``fail`` settles it as cancelled. Past
        its time limit the lease is not renewed: [LeaseLostError][conveyor.LeaseLostError]."""
        settle_single("extend", job, await self._run(self.core.extend([job], lease)), "")

    async def release(self, jobs: Sequence[Job], started: bool = False) -> list[int]:
        """Give leased jobs back to the front of the queue; unstarted jobs get their attempt back. A
        job whose cancel was requested ends cancelled instead, and a started job (``started=True``)
        on its last attempt ends failed (given back, it would run beyond ``max_attempts``). Per
        job: 1 released, 2 ended cancelled, 3 ended failed, 0 the lease is no longer held, -2 no
        such job."""
        flags = release_flags(jobs, started)
        return await self._run(self.core.release(jobs, flags)) if jobs else []

    async def promote(self, batch: int | None = None) -> int:
        """Move up to ``batch`` due delayed jobs to the waiting list."""
        return await self._run(promote_call(self.core, batch))

    async def recover(self, batch: int | None = None) -> tuple[int, int]:
        """Settle up to ``batch`` expired leases: (redelivered, ended failed for lack of attempts or
        cancelled)."""
        return await self._run(recover_call(self.core, batch))

    async def trim(self, batch: int | None = None) -> int:
        """Apply retention to completed, failed and cancelled jobs, at most ``batch`` removals per
        set (expired result records and deduplication entries too); returns how many jobs it removed."""
        return await self._run(trim_call(self.core, batch))

    async def result(self, job_id: str, timeout: float | None = None) -> Any:
        """The return value of job ``job_id``, waiting up to ``timeout`` seconds (None: no limit)
        without polling. Needs ``store_results``. Raises [JobFailedError][conveyor.JobFailedError]
        (with the stored error and attempts) if the job failed (also when its last attempt timed out:
        the error names the time limit), [JobCancelledError][conveyor.JobCancelledError] if it ended
        cancelled, ``TimeoutError`` if it has not finished in time, and
        [ConveyorError][conveyor.ConveyorError] if its result is gone (expired, trimmed, or never
        stored)."""
        self._own_loop()
        return await self._results.wait(job_id, timeout)

    async def cancel(self, job_id: str) -> bool:
        """Cancel a job: a waiting or delayed job is removed; an active one is marked, and the
        worker holding it stops its handler at its next heartbeat (within a third of the lease)
        and settles it as ``cancelled`` (so does lease recovery if that worker is gone). True in
        both cases; False if the job is finished or unknown."""
        return await self._run(self.core.cancel(job_id))

    async def aclose(self) -> None:
        """Close the client and its pool (and stop waiting for results).

        A call still in flight (another task's) either completes or raises
        [QueueClosedError][conveyor.QueueClosedError] with ``maybe_applied`` True: it may have been
        sent, so an enqueue may have created its job or not (repeat it only with a ``job_id``),
        with either driver (``maybe_applied`` False for a read: counts, get_job, jobs change nothing);
        never ConnectionFailedError. A call made after ``aclose()`` opens a new
        connection with redis-py; with glide it raises QueueClosedError, ``maybe_applied`` False
        (nothing was sent: a closed glide client cannot reconnect). A result wait ends with
        QueueClosedError too (a wait changes nothing on the server)."""
        self._closes += 1
        try:
            self._results.close()
            if self._direct is not None:
                await self._direct.close()
            if self._lone is not None:
                await self._lone.close()
            await self.client.aclose()
        finally:
            self._closes += 1


def other_loop_error(name: str, first: asyncio.AbstractEventLoop | None) -> ConveyorError:
    """A call on another event loop than the queue's first (see ``AsyncQueue._own_loop``)."""
    if first is None or first.is_closed():  # None: collected, so closed
        return closed_loop_error(name)
    return ConveyorError(
        f"AsyncQueue {name!r} belongs to the event loop it first ran on, and this call came from "
        "another one (redis-py's rule for asyncio clients): create one AsyncQueue per event loop"
    )


def closed_loop_error(name: str) -> ConveyorError:
    """A call after the queue's event loop closed (a module-level AsyncQueue used in two
    ``asyncio.run()`` calls)."""
    return ConveyorError(
        f"AsyncQueue {name!r} belongs to the event loop it first ran on, which is closed now "
        "(redis-py's rule for asyncio clients): create one AsyncQueue per event loop, for example "
        "inside the coroutine given to asyncio.run()"
    )
