"""Review of the producer API and the CLI: bad input refused with an error naming it, nothing written."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import (  # noqa: F401 - api_fixture provides the `api` fixture
    api_fixture,
    counts,
)
from conveyor import InvalidNameError, JobSpec, Limit

BAD = "name\udcff"  # a lone surrogate, as os.fsdecode() makes of a byte that is not UTF-8


async def test_names_that_are_not_valid_unicode_are_refused_and_fail_only_their_caller(api):
    """A lone surrogate in a task name, job id or limit key passed validation and failed in the
    client's UTF-8 encoder (UnicodeEncodeError, naming no argument). With automatic batching, the
    concurrent enqueues sent in the same call as the bad one failed with it (their jobs were lost)."""
    q = api.queue()
    bad_calls = [
        lambda: q.enqueue(BAD, 1),
        lambda: q.enqueue("t", 1, job_id=BAD),
        lambda: q.enqueue("t", 1, limit=Limit(BAD, concurrency=1)),
        lambda: q.enqueue_many([("t", 1), (BAD, 2)]),
        lambda: q.enqueue_many([JobSpec("t", 1), JobSpec("t", 2, job_id=BAD)]),
        lambda: q.cancel(BAD),
        lambda: q.get_job(BAD),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidNameError, match="is not valid Unicode text"):
            await call()
    assert api.queue_keys() == []
    with pytest.raises(InvalidNameError, match=r"queue name .* is not valid Unicode text"):
        api.queue(name=BAD)
    # Concurrent callers: the bad one fails alone, the others' jobs are all enqueued.
    results = await asyncio.gather(
        q.enqueue("t", 0), q.enqueue("t", 1), q.enqueue(BAD, 2), q.enqueue("t", 3), q.enqueue("t", 4),
        return_exceptions=True,
    )
    assert isinstance(results[2], InvalidNameError), results
    assert all(not isinstance(r, BaseException) for i, r in enumerate(results) if i != 2), results
    assert await q.counts() == counts(waiting=4)


async def test_get_job_with_an_id_that_is_not_a_string_names_the_problem(api):
    """get_job(5) or get_job(None) raised a bare TypeError from building the key ('can only
    concatenate str (not "int") to str'), where cancel() of the same id raised InvalidNameError."""
    q = api.queue()
    job = await q.enqueue("t", 1)
    for bad in (5, None, b"1"):
        with pytest.raises(InvalidNameError, match="job id must be a string"):
            await q.get_job(bad)
    assert (await q.get_job(job.id)).payload == 1  # generated (all-digit) ids still read


SCRIPT = Path(sys.executable).parent / "conveyor"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "conveyor"]


@pytest.mark.parametrize(("source", "shown"), [
    ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ("import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n", "SystemExit: 2"),
])
def test_an_app_module_that_exits_while_it_imports_is_bad_input(tmp_path, source, shown):
    """The SystemExit of a module exiting at import (a script with argparse at top level) went
    through the command unhandled: it exited with the module's code and no message of its own;
    sys.exit(3) looked like a worker forced to exit by a second signal (code 3)."""
    (tmp_path / "exits_on_import.py").write_text(source)
    result = subprocess.run([*COMMAND, "info", "exits_on_import:app"], cwd=tmp_path, env=os.environ.copy(),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, (result.returncode, result.stderr)
    last = result.stderr.splitlines()[-1]
    assert last == f"conveyor: error: cannot import module 'exits_on_import': {shown}", result.stderr
    assert "Traceback" not in result.stderr


async def test_a_failure_whose_error_text_is_not_valid_unicode_is_still_recorded(api):
    """An error message holding a lone surrogate (FileNotFoundError of a path os.fsdecode() made
    from bytes that are not UTF-8) made fail() raise UnicodeEncodeError in the client's encoder:
    the job stayed active, and a worker's failed attempt was never recorded (until lease recovery)."""
    q = api.queue()
    await q.enqueue("t", 1, max_attempts=1)
    [job] = await q.claim()
    assert await q.fail(job, FileNotFoundError("no such file: 'a\udcffb'")) == "failed"
    stored = await q.get_job(job.id)
    assert stored.state == "failed" and "a\\udcffb" in stored.error
