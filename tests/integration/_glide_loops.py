"""Glide's asyncio reply loop, in a process of its own (run as a script, not collected by pytest).

    python _glide_loops.py idle URL QUEUE      # the first glide loop stays open, idle; a queue
                                               # used from a thread's loop then prints its outcome
    python _glide_loops.py runner URL QUEUE    # same first loop; an asyncio Runner in a thread
                                               # (it refuses to start; else stopped once its
                                               # job's result is late)
    python _glide_loops.py cli URL QUEUE       # the Runner in the main thread, the only loop, as
                                               # `conveyor worker` runs it: runs one async job

Each prints one line: ``ok ...`` or ``<ErrorClass>: message``; ``hung`` if the thread did not end
within its deadline (glide's replies never came).
"""

from __future__ import annotations

import asyncio
import sys
import threading

from conveyor import AsyncQueue, Conveyor
from conveyor._runner import Runner

DEADLINE = 20.0


def _outcome(work) -> str:
    out: list[str] = []

    def run() -> None:
        try:
            out.append(f"ok {work()}")
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    return out[0] if out else "hung"


async def _counts(url: str, name: str) -> dict[str, int]:
    q = AsyncQueue.from_url(url, name, driver="glide")
    try:
        return await q.counts()
    finally:
        await q.aclose()


def _app(url: str, name: str) -> Conveyor:
    app = Conveyor(url, driver="glide", store_results=True)

    @app.task(queue=name, name="add")
    async def add(a: int, b: int) -> int:
        return a + b

    return app


def _serve_one(app: Conveyor, runner: Runner, wait: float) -> str:
    """Run one job through ``runner`` (stopped after its result or ``wait`` s); the stats and result."""
    job = app.enqueue("add", 1, 2)
    result: list[object] = []

    def stop_after_result() -> None:
        try:
            result.append(job.result(wait))
        except Exception as exc:  # late: the stats show why
            result.append(type(exc).__name__)
        finally:
            runner.stop()

    threading.Thread(target=stop_after_result, daemon=True).start()
    return f"{runner.run()} result {result}"


def main(mode: str, url: str, name: str) -> None:
    if mode == "cli":
        app = _app(url, name)
        print(f"ok {_serve_one(app, Runner(app, [name]), DEADLINE)}")
        return
    first = asyncio.new_event_loop()  # the process's first glide loop: kept open, not running
    first.run_until_complete(_counts(url, name))
    if mode == "idle":
        print(_outcome(lambda: asyncio.run(_counts(url, name))))
    else:
        app = _app(url, name)
        print(_outcome(lambda: _serve_one(app, Runner(app, [name]), 3.0)))


if __name__ == "__main__":
    main(*sys.argv[1:4])
