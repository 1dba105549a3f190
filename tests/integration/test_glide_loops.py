"""valkey-glide (asyncio) reads every reply of a process on the loop of its first glide client
until that loop closes (valkey-io/valkey-glide#7122). A loop of Conveyor's whose replies could never
arrive is a clear error, never a silent hang; a Runner alone in its process (`conveyor worker`)
serves async jobs. Each case runs in a fresh process (tests/integration/_glide_loops.py): in this
one, a loop that runs all session long reads glide's replies (conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("_glide_loops.py")
LIMITATION = "valkey-io/valkey-glide#7122"


@pytest.fixture
def run_case(redis_url, queue_name, driver):
    if driver != "glide":
        pytest.skip("the glide driver's event loops")

    def run(mode: str) -> tuple[str, str]:
        done = subprocess.run([sys.executable, str(SCRIPT), mode, redis_url, queue_name],
                              capture_output=True, text=True, timeout=120, check=True)
        return done.stdout.strip().splitlines()[-1], done.stderr

    return run


def test_a_loop_glide_would_never_answer_is_an_error_naming_the_limitation(run_case):
    outcome, _ = run_case("idle")
    assert outcome.startswith("ConveyorError: driver 'glide' (asyncio)"), outcome
    assert LIMITATION in outcome and "open but not running" in outcome


def test_a_runner_in_such_a_thread_refuses_to_start_naming_the_limitation(run_case):
    """The runner's first call (one counts() per queue before any worker starts) meets the loop
    glide would never answer: the run fails at once with the reason, instead of serving nothing."""
    outcome, _ = run_case("runner")
    assert outcome.startswith("ConveyorError: driver 'glide' (asyncio)"), outcome  # not hung
    assert LIMITATION in outcome and "open but not running" in outcome


def test_the_runner_alone_in_its_process_serves_async_jobs(run_case):
    outcome, log = run_case("cli")
    assert outcome.endswith("'processed': 1, 'failed': 0, 'held': 0}} result [3]"), (outcome, log)
    assert LIMITATION not in log
