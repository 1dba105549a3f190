"""arq: asyncio ``enqueue_job`` and ``Worker`` (polls one sorted set every ``poll_delay``).

Settings: ``worker`` (Worker options: poll_delay, keep_result, job_timeout, max_tries).
No bulk enqueue API.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


async def noop(ctx: Any, data: dict[str, Any]) -> None:
    await _base.async_handler(data)


class Peer(_base.PeerBase):
    imports = ("arq",)
    async_enqueue = True

    def _redis_settings(self) -> Any:
        from arq.connections import RedisSettings  # noqa: PLC0415

        return RedisSettings.from_dsn(self.url)

    async def aopen(self) -> None:
        from arq import create_pool  # noqa: PLC0415

        self.pool = await create_pool(self._redis_settings(), default_queue_name=self.queue)

    async def aenqueue(self, job_id: str) -> None:
        await self.pool.enqueue_job("noop", _base.payload(job_id))

    async def aclose(self) -> None:
        await self.pool.aclose()

    def work(self, concurrency: int) -> None:
        from arq.worker import Worker  # noqa: PLC0415

        async def run() -> None:
            worker = Worker(functions=[noop], redis_settings=self._redis_settings(),
                            queue_name=self.queue, max_jobs=concurrency, handle_signals=False,
                            **self.settings.get("worker", {}))
            await worker.async_run()

        asyncio.run(run())

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("arq")["arq"],
                **_base.dist_versions("redis", "hiredis")}
