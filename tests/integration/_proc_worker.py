"""Worker process for the crash and load tests (run as a script, not collected by pytest).

    python _proc_worker.py crash URL QUEUE OUT   # sync Worker, lease 1 s; writes each claimed id to
                                                # OUT as the handler starts, then sleeps forever
    python _proc_worker.py load URL QUEUE OUT    # one sync Worker (threads) and one AsyncWorker in
                                                # this process; on SIGTERM both stop gracefully and
                                                # every processed id is written to OUT as
                                                # "<worker> <id>" lines
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

from conveyor import AsyncQueue, AsyncWorker, Queue, Worker


def crash(url: str, name: str, out: Path) -> None:
    q = Queue.from_url(url, name, lease=1.0, keep_completed=-1)

    def hang(job):
        with out.open("a") as f:
            f.write(f"{job.id}\n")
        time.sleep(600)

    Worker(q, {"crash": hang}, concurrency=2).run()


def load(url: str, name: str, out: Path) -> None:
    seen: dict[str, list[str]] = {"sync": [], "async": []}
    sync_q = Queue.from_url(url, name, keep_completed=-1)
    sync_worker = Worker(sync_q, {"load": lambda job: seen["sync"].append(job.id)},
                         concurrency=4, install_signal_handlers=False)
    thread = threading.Thread(target=sync_worker.run, name="sync-worker")
    thread.start()

    async def main() -> None:
        aq = AsyncQueue.from_url(url, name, keep_completed=-1)

        async def handle(job):
            seen["async"].append(job.id)

        # the AsyncWorker owns SIGTERM/SIGINT in this process: it stops gracefully on either
        await AsyncWorker(aq, {"load": handle}, concurrency=32).run()
        await aq.aclose()

    try:
        asyncio.run(main())
    finally:
        sync_worker.stop()
        thread.join(30)
        sync_q.close()
        lines = [f"{label} {job_id}\n" for label, ids in seen.items() for job_id in ids]
        tmp = out.with_suffix(".tmp")
        tmp.write_text("".join(lines))
        tmp.rename(out)


if __name__ == "__main__":
    mode, url, name, path = sys.argv[1:5]
    {"crash": crash, "load": load}[mode](url, name, Path(path))
