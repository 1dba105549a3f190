"""Worker options of the wrong type are refused at construction, naming the option.

Before, a float count or a bool passed the range checks (``concurrency=2.5``, ``prefetch=0.5``,
``shutdown_timeout=True``) and a str failed them with a bare ``TypeError`` from a comparison; a
float prefetch then made every claim budget a float, so each pump call raised and the worker
logged "worker pump error; retrying" for ever without processing a job.
"""

from __future__ import annotations

import pytest
import redis
from conveyor import Queue, Worker
from conveyor._dispatch import WorkerOptions


def _offline_queue() -> Queue:
    return Queue("q", redis.Redis(host="127.0.0.1", port=1))  # never connects


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 2.5}, r"concurrency must be an int in 1\.\.1000, got 2\.5"),
        ({"concurrency": True}, r"concurrency must be an int in 1\.\.1000, got True"),
        ({"concurrency": "4"}, r"concurrency must be an int in 1\.\.1000, got '4'"),
        ({"prefetch": 0.5}, r"prefetch must be an int in 0\.\.1000, got 0\.5"),
        ({"prefetch": False}, r"prefetch must be an int in 0\.\.1000, got False"),
        ({"shutdown_timeout": "5"}, r"shutdown_timeout must be >= 0 seconds, got '5'"),
        ({"shutdown_timeout": True}, r"shutdown_timeout must be >= 0 seconds, got True"),
        ({"shutdown_timeout": float("nan")}, r"shutdown_timeout must be >= 0 seconds, got nan"),
        ({"block_timeout": True}, r"block_timeout must be a finite number of seconds > 0, got True"),
        ({"block_timeout": "2"}, r"block_timeout must be a finite number of seconds > 0, got '2'"),
        ({"burst": "no"}, r"burst must be True or False, got 'no'"),
        ({"install_signal_handlers": None}, r"install_signal_handlers must be True or False, got None"),
    ],
)
def test_worker_options_of_the_wrong_type_are_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        Worker(_offline_queue(), {"t": lambda job: None}, **options)


def test_worker_options_of_the_right_type_are_accepted():
    opts = WorkerOptions(concurrency=4, prefetch=2, shutdown_timeout=float("inf"), block_timeout=0.5,
                         burst=True, install_signal_handlers=False)
    assert opts.capacity == 6
    assert WorkerOptions(shutdown_timeout=0, block_timeout=1).shutdown_timeout == 0
