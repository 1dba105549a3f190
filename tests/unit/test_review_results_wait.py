"""Review of result waiting: bad input refused with an error naming it (no server needed)."""

from __future__ import annotations

import re

import pytest
from conveyor._results import check_wait


@pytest.mark.parametrize("bad", ["5", True, [1], float("nan"), -1])
def test_a_result_timeout_that_is_not_a_number_of_seconds_is_refused_naming_it(bad):
    """result(job_id, timeout=...) takes None or a number of seconds >= 0. Before, a str or list
    raised a bare TypeError from a comparison ("'>=' not supported ...") naming no argument, and
    True was taken for a 1 s timeout."""
    with pytest.raises(ValueError, match=re.escape(f"timeout must be None or >= 0 seconds, got {bad!r}")):
        check_wait("1", bad)


def test_result_timeouts_that_are_numbers_or_none_are_accepted():
    for good in (None, 0, 0.5, 3, float("inf")):
        assert check_wait("7", good) == "7"
