"""Chaos suite (issue 7): sync and asyncio worker processes behind a proxy the test cuts, on a
server with AOF on, while workers are SIGKILLed, SIGTERMed and frozen past the lease (SIGSTOP),
connections are cut, the server is paused past the socket timeout and restarted; a quarter of the
jobs run under concurrency limits (_key_limits.py checks no key ran over its limit), others carry
priorities and delays or run past their time limit (_time_limits.py), and the producer cancels
some (_cancels.py). See _chaos.py for the run, _verdict.py for the rules and _stallwatch.py
for how a stalled worker is told apart.

`test_chaos` (marked chaos) runs on every local server with a fixed seed in `nox -s tests`.
`test_soak` runs only when CONVEYOR_SOAK_SECONDS is set (`nox -s soak`, default 300 s per server)
and also checks that the server's memory stays flat. CONVEYOR_CHAOS_SEED replays another seed;
CONVEYOR_CHAOS_DISABLE (comma-separated fault kinds) switches fault classes off, and the summary
says so (default: AWAITING_FIXES below).
"""

from __future__ import annotations

import os

import pytest
from _chaos import FAULTS, ChaosConfig, run_chaos
from _verdict import SUMMARIES

from bench.servers import RunningServer, start_server

SEED = int(os.environ.get("CONVEYOR_CHAOS_SEED", "20261130"))
# Fault classes switched off by default while they exposed open library defects; empty since the
# fixes of issue 7 (defect 1: heartbeats stopped during a graceful shutdown, so a SIGTERMed worker's
# long job ran twice; defect 3: a SIGTERMed worker cut off from the server missed its deadline).
AWAITING_FIXES = ""
DISABLED = tuple(f for f in os.environ.get("CONVEYOR_CHAOS_DISABLE", AWAITING_FIXES).split(",") if f)
SOAK_SECONDS = float(os.environ.get("CONVEYOR_SOAK_SECONDS", "0") or 0)


def _run(server: RunningServer, cfg: ChaosConfig, tmp_path) -> None:
    assert set(DISABLED) <= set(FAULTS), f"CONVEYOR_CHAOS_DISABLE: unknown fault in {DISABLED}"
    with start_server(server.kind, "aof-everysec") as aof_server:
        verdict = run_chaos(aof_server, cfg, tmp_path)
    line = verdict.report()
    SUMMARIES.append(line)
    print(line, *verdict.fault_log, sep="\n")
    assert not verdict.problems, "\n".join([line, *verdict.problems, "faults:", *verdict.fault_log])


@pytest.mark.chaos
def test_chaos(server: RunningServer, tmp_path) -> None:
    _run(server, ChaosConfig(seed=SEED, disabled_faults=DISABLED), tmp_path)


@pytest.mark.soak
@pytest.mark.timeout(SOAK_SECONDS + 900)
@pytest.mark.skipif(not SOAK_SECONDS, reason="soak: set CONVEYOR_SOAK_SECONDS (nox -s soak)")
def test_soak(server: RunningServer, tmp_path) -> None:
    cfg = ChaosConfig(seed=SEED, jobs=None, seconds=SOAK_SECONDS, keep_completed=500, keep_failed=100,
                      fault_gap=5.0, disabled_faults=DISABLED, drain_timeout=120.0)  # fmt: skip
    _run(server, cfg, tmp_path)
