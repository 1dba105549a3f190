"""Worker process of the chaos suite (run as a script, not collected by pytest).

    python _chaos_worker.py sync|async URL QUEUE RUNS_DIR SETTINGS_JSON

Runs one `Worker` (threads) or `AsyncWorker` (asyncio) on QUEUE at URL (the test's proxy) until
SIGTERM. The single task `chaos` takes a payload {"ms": duration, "kind": "ok" | "flaky" | "doomed" |
"overtime"}: ok jobs sleep and succeed, flaky jobs fail their first attempt, doomed jobs always
fail, overtime jobs sleep past their time limit (an attempt stopped by it is recorded as `fail`:
the queue failed it, so a next attempt is a retry, not a repeat).

Every run is recorded in RUNS_DIR/<pid>.runs with one os.write per line, so the record survives a
SIGKILL of this process:
`start|ok|fail <job id> <attempt> <pid> <unix time> <handler ms> <limit key, or ->`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from _stallwatch import StallWatch
from conveyor import AsyncQueue, AsyncWorker, Backoff, Job, Queue, Worker

PID = os.getpid()


class Recorder:
    def __init__(self, runs_dir: Path) -> None:
        self._fd = os.open(runs_dir / f"{PID}.runs", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, event: str, job: Job) -> None:
        ms, key = job.payload["ms"], job.payload.get("key", "-")
        os.write(self._fd, f"{event} {job.id} {job.attempts} {PID} {time.time():.6f} {ms} {key}\n".encode())


def outcome(job: Job) -> tuple[float, bool]:
    """(seconds to sleep, whether this run fails)."""
    payload: dict[str, Any] = job.payload
    kind = payload["kind"]
    fails = kind == "doomed" or (kind == "flaky" and job.attempts <= 1)
    return payload["ms"] / 1000.0, fails


def returned(job: Job) -> dict[str, int]:
    """What a successful run returns (its stored result): the attempt and the process, so the
    verdict can tell which run a stored result came from."""
    return {"attempt": job.attempts, "pid": PID}


class HandlerFailure(RuntimeError):
    """The chaos handler's deliberate failure."""


def sync_handler(record: Recorder):
    def chaos(job: Job) -> dict[str, int]:
        record("start", job)
        seconds, fails = outcome(job)
        time.sleep(seconds)
        record("fail" if fails or job.stop_reason == "timeout" else "ok", job)
        if fails:
            raise HandlerFailure(f"deliberate failure of {job.id} attempt {job.attempts}")
        return returned(job)

    return chaos


def async_handler(record: Recorder):
    async def chaos(job: Job) -> dict[str, int]:
        record("start", job)
        seconds, fails = outcome(job)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if job.stop_reason == "timeout":
                record("fail", job)
            raise
        record("fail" if fails else "ok", job)
        if fails:
            raise HandlerFailure(f"deliberate failure of {job.id} attempt {job.attempts}")
        return returned(job)

    return chaos


def queue_settings(raw: dict[str, Any]) -> dict[str, Any]:
    settings = dict(raw["queue"])
    settings["backoff"] = Backoff(**settings.pop("backoff"))
    return settings


class EarlyStop:
    """SIGTERM before the worker's own handler is installed (a process still starting) stops the
    worker as soon as it exists, as an application's entry point would; the worker's handler
    replaces this one while it runs."""

    def __init__(self) -> None:
        self.requested = False
        self.worker: Worker | AsyncWorker | None = None
        signal.signal(signal.SIGTERM, self)

    def __call__(self, *_: Any) -> None:
        self.requested = True
        if self.worker is not None:
            self.worker.stop()

    def attach(self, worker: Worker | AsyncWorker) -> None:
        self.worker = worker
        if self.requested:
            worker.stop()


def main() -> None:
    early = EarlyStop()
    mode, url, name, runs_dir, raw = sys.argv[1:6]
    config = json.loads(raw)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {PID} %(name)s %(message)s")
    record = Recorder(Path(runs_dir))
    settings, options = queue_settings(config), config["worker"]
    stalls = Path(runs_dir) / f"{PID}.stalls"
    if mode == "sync":
        StallWatch(stalls)
        q = Queue.from_url(url, name, **settings)
        worker = Worker(q, {"chaos": sync_handler(record)}, **options)
        early.attach(worker)
        stats = worker.run()
        q.close()
    else:

        async def run() -> dict[str, int]:
            StallWatch(stalls, asyncio.get_running_loop())
            aq = AsyncQueue.from_url(url, name, **settings)
            try:
                worker = AsyncWorker(aq, {"chaos": async_handler(record)}, **options)
                early.attach(worker)
                return await worker.run()
            finally:
                await aq.aclose()

        stats = asyncio.run(run())
    logging.getLogger("chaos").info("worker %s exits: %s", mode, stats)


if __name__ == "__main__":
    main()
