"""huey: ``RedisHuey`` (one list, BRPOP, no acknowledgement), sync task calls, a consumer
with thread workers. No bulk enqueue API.

Settings: ``huey`` (RedisHuey options: results, blocking), ``consumer`` (Consumer options:
worker_type "thread" by default; "greenlet" monkey-patches the process with gevent first, as
huey's own consumer script does).
"""

from __future__ import annotations

from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("huey",)
    sync_enqueue = True

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        if settings.get("consumer", {}).get("worker_type") == "greenlet":
            from gevent import monkey  # noqa: PLC0415 (before huey opens a socket)

            monkey.patch_all()
        from huey import RedisHuey  # noqa: PLC0415

        self.huey = RedisHuey(self.queue, url=url, **settings.get("huey", {}))

        @self.huey.task(name="noop")
        def noop(data: dict[str, Any]) -> None:
            _base.sync_handler(data)

        self.task = noop

    def enqueue(self, job_id: str) -> None:
        self.task(_base.payload(job_id))

    def work(self, concurrency: int) -> None:
        options = {"worker_type": "thread", "periodic": False, **self.settings.get("consumer", {})}
        consumer = self.huey.create_consumer(workers=concurrency, **options)
        consumer.run()

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("huey")["huey"],
                **_base.dist_versions("redis", "hiredis")}
