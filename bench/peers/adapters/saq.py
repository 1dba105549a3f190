"""SAQ: asyncio ``Queue.enqueue`` and ``Worker`` (handlers looked up by name: module level).

Settings: ``job`` (per-job options: ttl, timeout, retries), ``worker`` (Worker options such as
timers for the sweep that recovers abandoned jobs). No bulk enqueue API (``map`` waits for
results).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


async def noop(ctx: Any, **data: Any) -> None:
    await _base.async_handler(data)


class Peer(_base.PeerBase):
    imports = ("saq",)
    async_enqueue = True

    async def aopen(self) -> None:
        from saq import Queue  # noqa: PLC0415

        self.q = Queue.from_url(self.url, name=self.queue)
        await self.q.connect()
        self.opts = dict(self.settings.get("job", {}))

    async def aenqueue(self, job_id: str) -> None:
        await self.q.enqueue("noop", **self.opts, **_base.payload(job_id))

    async def aclose(self) -> None:
        await self.q.disconnect()

    def work(self, concurrency: int) -> None:
        from saq import Queue, Worker  # noqa: PLC0415

        async def run() -> None:
            q = Queue.from_url(self.url, name=self.queue)
            worker = Worker(q, functions=[noop], concurrency=concurrency,
                            **self.settings.get("worker", {}))
            await worker.start()

        asyncio.run(run())

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("saq")["saq"],
                **_base.dist_versions("redis", "hiredis")}
