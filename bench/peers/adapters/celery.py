"""Celery: sync ``task.delay`` over the Redis transport (lists + BRPOP); the worker runs in
this process with the ``threads`` pool (prefork would need a process per slot).

Settings: ``conf`` (Celery configuration: task_ignore_result, task_acks_late,
broker_transport_options.visibility_timeout, worker_prefetch_multiplier). No bulk API.
"""

from __future__ import annotations

from typing import Any

from bench.peers.adapters import _base


class Peer(_base.PeerBase):
    imports = ("celery",)
    sync_enqueue = True

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        from celery import Celery  # noqa: PLC0415

        self.app = Celery("bench", broker=url)
        self.app.conf.update(task_default_queue=self.queue, worker_hijack_root_logger=False,
                             **settings.get("conf", {}))

        @self.app.task(name="noop")
        def noop(data: dict[str, Any]) -> None:
            _base.sync_handler(data)

        self.task = noop

    def enqueue(self, job_id: str) -> None:
        self.task.delay(_base.payload(job_id))

    def close(self) -> None:
        self.app.close()

    def work(self, concurrency: int) -> None:
        worker = self.app.Worker(pool="threads", concurrency=concurrency, loglevel="WARNING",
                                 without_heartbeat=True, without_mingle=True,
                                 without_gossip=True, quiet=True)
        worker.start()

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("celery")["celery"],
                **_base.dist_versions("kombu", "redis", "hiredis")}
