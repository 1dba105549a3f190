"""bullmq (Python port): asyncio ``Queue.add`` / ``addBulk`` and ``Worker``.

Settings: ``job`` (job options, e.g. removeOnComplete), ``worker`` (extra Worker options such
as stalledInterval for crash recovery).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("bullmq",)
    async_enqueue = True
    bulk = "async"

    async def aopen(self) -> None:
        from bullmq import Queue  # noqa: PLC0415

        self.q = Queue(self.queue, {"connection": self.url})
        self.opts = dict(self.settings.get("job", {}))

    async def aenqueue(self, job_id: str) -> None:
        await self.q.add("noop", _base.payload(job_id), self.opts)

    async def aenqueue_bulk(self, ids: list[str]) -> None:
        await self.q.addBulk([{"name": "noop", "data": _base.payload(i), "opts": self.opts}
                              for i in ids])

    async def aclose(self) -> None:
        await self.q.close()

    def work(self, concurrency: int) -> None:
        from bullmq import Worker  # noqa: PLC0415

        async def process(job: Any, token: Any) -> None:
            await _base.async_handler(job.data)

        async def run() -> None:
            opts = {"connection": self.url, "concurrency": concurrency,
                    **self.settings.get("worker", {})}
            Worker(self.queue, process, opts)
            await asyncio.Event().wait()

        asyncio.run(run())

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("bullmq")["bullmq"],
                **_base.dist_versions("redis", "hiredis")}
