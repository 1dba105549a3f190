"""streaq: streams + Redis Functions, anyio; ``task.enqueue`` and ``Worker.enqueue_many``.

Settings: ``task`` (task options: ttl for result retention), ``worker`` (Worker options:
idle_timeout, after which a consumer's unacknowledged tasks are reclaimed). Redis client:
coredis (not redis-py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("streaq",)
    async_enqueue = True
    bulk = "async"

    def _worker(self, concurrency: int = 16) -> Any:
        from streaq import Worker  # noqa: PLC0415

        worker = Worker(redis_url=self.url, queue_name=self.queue, concurrency=concurrency,
                        handle_signals=False, **self.settings.get("worker", {}))

        @worker.task(name="noop", **self.settings.get("task", {}))
        async def noop(data: dict[str, Any]) -> None:
            await _base.async_handler(data)

        self.task = noop
        return worker

    async def aopen(self) -> None:
        self.w = self._worker()
        await self.w.__aenter__()

    async def aenqueue(self, job_id: str) -> None:
        await self.task.enqueue(_base.payload(job_id))

    async def aenqueue_bulk(self, ids: list[str]) -> None:
        await self.w.enqueue_many([self.task.enqueue(_base.payload(i)) for i in ids])

    async def aclose(self) -> None:
        await self.w.__aexit__(None, None, None)

    def work(self, concurrency: int) -> None:
        asyncio.run(self._worker(concurrency).run_async())

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("streaq")["streaq"],
                **_base.dist_versions("coredis", "redis", "hiredis")}
