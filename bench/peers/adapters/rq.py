"""RQ: sync ``Queue.enqueue`` / ``enqueue_many`` (one pipeline); workers are processes.

Settings: ``job`` (enqueue options: result_ttl, job_timeout, retry_max), ``worker_class``
("Worker" forks a work horse per job, "SimpleWorker" runs jobs in the worker process),
``max_processes`` (RQ has no in-process concurrency: concurrency C runs min(C, max) processes).
"""

from __future__ import annotations

from typing import Any

from bench.peers.adapters import _base


def noop(data: dict[str, Any]) -> None:
    _base.sync_handler(data)


class Peer(_base.PeerBase):
    imports = ("rq",)
    sync_enqueue = True
    bulk = "sync"

    def __init__(self, url: str, settings: dict[str, Any]) -> None:
        super().__init__(url, settings)
        from redis import Redis  # noqa: PLC0415
        from rq import Queue  # noqa: PLC0415

        self.conn = Redis.from_url(url)
        self.q = Queue(self.queue, connection=self.conn)
        self.opts = dict(settings.get("job", {}))
        retries = self.opts.pop("retry_max", None)
        if retries:
            from rq import Retry  # noqa: PLC0415

            self.opts["retry"] = Retry(max=retries)

    def enqueue(self, job_id: str) -> None:
        self.q.enqueue(noop, _base.payload(job_id), **self.opts)

    def enqueue_bulk(self, ids: list[str]) -> None:
        from rq import Queue  # noqa: PLC0415

        opts = dict(self.opts)  # prepare_data names enqueue's job_timeout "timeout"
        if "job_timeout" in opts:
            opts["timeout"] = opts.pop("job_timeout")
        self.q.enqueue_many([Queue.prepare_data(noop, args=(_base.payload(i),), **opts)
                             for i in ids])

    def close(self) -> None:
        self.conn.close()

    def work(self, concurrency: int) -> None:
        import rq.worker  # noqa: PLC0415

        cls = getattr(rq.worker, self.settings.get("worker_class", "Worker"))

        def one(_: int) -> None:
            from redis import Redis  # noqa: PLC0415
            from rq import Queue  # noqa: PLC0415

            conn = Redis.from_url(self.url)
            cls([Queue(self.queue, connection=conn)], connection=conn).work(
                logging_level="WARNING", with_scheduler=False)

        _base.fork_each([1] * min(concurrency, self.settings.get("max_processes", 16)), one)

    @staticmethod
    def versions() -> dict[str, str]:
        return {"library": _base.dist_versions("rq")["rq"],
                **_base.dist_versions("redis", "hiredis")}
