"""Helpers for the benchmark-suite tests: run ``python -m bench`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.servers import ServerUnavailable, locate

REPO = Path(__file__).resolve().parents[2]
SERVER = os.environ.get("BENCH_TEST_SERVER", "valkey-9.1")


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(REPO / "queue"), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    env.update(extra)
    return env


@pytest.fixture
def run_bench() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m bench ARGS`` from the repo root; returns the completed process."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 240):
        return subprocess.run(
            [sys.executable, "-m", "bench", *args], cwd=REPO, env=_env(env or {}),
            capture_output=True, text=True, timeout=timeout, check=False,
        )

    return run


@pytest.fixture(scope="module")
def bench_server() -> str:
    """The server kind the bench tests use (skipped when it cannot start here)."""
    try:
        locate(SERVER)
    except ServerUnavailable as exc:
        pytest.skip(exc.reason)
    return SERVER
