"""The stall watch tells a loop blocked by code from a process that got no CPU (no server)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from _stalls import read_stalls
from _stallwatch import StallWatch

HERE = Path(__file__).resolve().parent
FROZEN = f"""
import asyncio, sys
sys.path.insert(0, {str(HERE)!r})
from pathlib import Path
from _stallwatch import StallWatch

async def main():
    StallWatch(Path(sys.argv[1]), asyncio.get_running_loop())
    print("watching", flush=True)
    await asyncio.sleep(2.5)

asyncio.run(main())
"""


def test_a_blocking_call_in_the_loop_is_blocked_and_named(tmp_path: Path) -> None:
    async def main() -> None:
        StallWatch(tmp_path / "1.stalls", asyncio.get_running_loop())
        await asyncio.sleep(0.2)
        time.sleep(1.5)  # the defect a worker must not have
        await asyncio.sleep(0.2)

    asyncio.run(main())
    [stall] = read_stalls(tmp_path)
    assert stall.cause == "blocked" and stall.seconds >= 1.4
    assert "test_stallwatch.py" in stall.line and "main" in stall.line


def test_a_stopped_process_is_frozen(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", FROZEN, str(tmp_path / "2.stalls")],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "watching\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(1.5)
    proc.send_signal(signal.SIGCONT)
    assert proc.wait(30) == 0
    [stall] = read_stalls(tmp_path)
    assert stall.cause == "frozen" and stall.seconds >= 1.4
