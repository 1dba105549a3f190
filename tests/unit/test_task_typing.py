"""Typed tasks: mypy accepts correct enqueue calls and rejects wrong ones, line by line."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")
SAMPLE = Path(__file__).resolve().parents[1] / "typing" / "typed_tasks_sample.py"
QUEUE_DIR = Path(__file__).resolve().parents[2] / "queue"


def test_mypy_checks_task_arguments_through_paramspec():
    stdout, stderr, _ = mypy_api.run([
        "--strict", "--no-incremental", "--cache-dir=/dev/null", "--python-version=3.11",
        f"--config-file={QUEUE_DIR.parent / 'pyproject.toml'}", str(SAMPLE),
    ])
    lines = SAMPLE.read_text().splitlines()
    expected = {i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# error")}
    reported = {
        int(row.split(":")[1])
        for row in stdout.splitlines()
        if row.split(":")[0].endswith(SAMPLE.name) and ": error:" in row
    }
    assert expected, "the sample has no line expected to fail"
    assert reported == expected, f"mypy output:\n{stdout}{stderr}"
