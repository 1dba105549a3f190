"""taskiq-redis: ``RedisStreamBroker`` (streams + consumer group, acknowledged), asyncio
``task.kiq`` and a ``Receiver`` with ``max_async_tasks``; no bulk kick API.

Settings: ``broker`` (RedisStreamBroker options: idle_timeout for reclaiming unacknowledged
messages), ``receiver`` (Receiver options).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("taskiq_redis",)
    async_enqueue = True

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        from taskiq_redis import RedisStreamBroker  # noqa: PLC0415

        self.broker = RedisStreamBroker(url, queue_name=self.queue, **settings.get("broker", {}))

        @self.broker.task(task_name="noop")
        async def noop(data: dict[str, Any]) -> None:
            await _base.async_handler(data)

        self.task = noop

    async def aopen(self) -> None:
        await self.broker.startup()

    async def aenqueue(self, job_id: str) -> None:
        await self.task.kiq(_base.payload(job_id))

    async def aclose(self) -> None:
        await self.broker.shutdown()

    def work(self, concurrency: int) -> None:
        from taskiq.receiver import Receiver  # noqa: PLC0415

        async def run() -> None:
            self.broker.is_worker_process = True
            await self.broker.startup()
            receiver = Receiver(self.broker, max_async_tasks=concurrency,
                                **self.settings.get("receiver", {}))
            await receiver.listen(asyncio.Event())

        asyncio.run(run())

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("taskiq-redis")["taskiq-redis"],
                **_base.dist_versions("taskiq", "redis", "hiredis")}
