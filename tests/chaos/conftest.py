"""Chaos-suite plumbing: collect each run's summary and print them at the end of the session."""

from __future__ import annotations

import pytest
from _verdict import SUMMARIES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUMMARIES:
        terminalreporter.section("chaos summary")
        for line in SUMMARIES:
            terminalreporter.write_line(line)
