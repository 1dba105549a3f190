"""Conveyor: sync ``Queue``/``Worker`` and asyncio ``AsyncQueue``/``AsyncWorker``.

Settings: ``worker`` ("sync" or "async"), ``lease`` (seconds; crash recovery), ``keep_completed``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("conveyor",)
    sync_enqueue = True
    async_enqueue = True
    bulk = "sync"

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        self.options = {k: settings[k] for k in ("lease", "keep_completed") if k in settings}
        self._queue: Any = None
        self._aqueue: Any = None

    @property
    def sync_queue(self) -> Any:
        if self._queue is None:
            from conveyor import Queue  # noqa: PLC0415

            self._queue = Queue.from_url(self.url, self.queue, **self.options)
        return self._queue

    def enqueue(self, job_id: str) -> None:
        self.sync_queue.enqueue("noop", _base.payload(job_id))

    def enqueue_bulk(self, ids: list[str]) -> None:
        self.sync_queue.enqueue_many([("noop", _base.payload(i)) for i in ids])

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()

    async def aopen(self) -> None:
        from conveyor import AsyncQueue  # noqa: PLC0415

        self._aqueue = AsyncQueue.from_url(self.url, self.queue, **self.options)

    async def aenqueue(self, job_id: str) -> None:
        await self._aqueue.enqueue("noop", _base.payload(job_id))

    async def aclose(self) -> None:
        await self._aqueue.aclose()

    def work(self, concurrency: int) -> None:
        from conveyor import AsyncWorker, Worker  # noqa: PLC0415

        if self.settings.get("worker") == "async":
            async def noop(job: Any) -> None:
                await _base.async_handler(job.payload)

            async def run() -> None:
                from conveyor import AsyncQueue  # noqa: PLC0415

                queue = AsyncQueue.from_url(self.url, self.queue, **self.options)
                await AsyncWorker(queue, {"noop": noop}, concurrency=concurrency).run()

            asyncio.run(run())
        else:
            Worker(self.sync_queue, {"noop": lambda job: _base.sync_handler(job.payload)},
                   concurrency=concurrency).run()

    @staticmethod
    def versions() -> dict[str, str]:
        import conveyor  # noqa: PLC0415

        return {"library": conveyor.__version__, **_base.dist_versions("redis", "hiredis")}
