"""Dramatiq: sync ``actor.send`` and a threaded ``Worker``; no bulk send API.

Settings: ``broker`` (RedisBroker options: heartbeat_timeout, dead_message_ttl),
``worker`` (Worker options: worker_timeout).
"""

from __future__ import annotations

import threading
from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("dramatiq",)
    sync_enqueue = True

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        import dramatiq  # noqa: PLC0415
        from dramatiq.brokers.redis import RedisBroker  # noqa: PLC0415

        self.broker = RedisBroker(url=url, **settings.get("broker", {}))
        dramatiq.set_broker(self.broker)

        @dramatiq.actor(queue_name=self.queue, max_retries=settings.get("max_retries", 20))
        def noop(data: dict[str, Any]) -> None:
            _base.sync_handler(data)

        self.actor = noop

    def enqueue(self, job_id: str) -> None:
        self.actor.send(_base.payload(job_id))

    def close(self) -> None:
        self.broker.close()

    def work(self, concurrency: int) -> None:
        from dramatiq import Worker  # noqa: PLC0415

        Worker(self.broker, worker_threads=concurrency, **self.settings.get("worker", {})).start()
        threading.Event().wait()

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("dramatiq")["dramatiq"],
                **_base.dist_versions("redis", "hiredis")}
