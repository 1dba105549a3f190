"""Errors that name what is wrong and where: schedules, current_job()."""

from __future__ import annotations

import pytest
from conveyor import Schedule


@pytest.mark.parametrize(
    ("cron", "reason"),
    [
        ("61 * * * *", "out of range"),
        ("* * * *", "Exactly 5, 6 or 7 columns"),
        ("every day", "Exactly 5, 6 or 7 columns"),
        ("a b c d e", "not acceptable"),
        ("* * 31 2 *", "never matches a date to come"),
    ],
)
def test_an_invalid_cron_expression_names_the_schedule_and_the_reason(cron, reason):
    # it said only "invalid cron expression '61 * * * *'": neither which schedule nor what is wrong
    with pytest.raises(ValueError, match="schedule 'nightly': invalid cron expression") as caught:
        Schedule("nightly", "report", "default", cron=cron)
    assert repr(cron) in str(caught.value) and reason in str(caught.value)


def test_an_unknown_time_zone_names_the_schedule():
    with pytest.raises(ValueError, match="schedule 'nightly': unknown time zone 'Mars/Olympus'"):
        Schedule("nightly", "report", "default", cron="0 3 * * *", tz="Mars/Olympus")


def test_current_job_outside_an_app_task_says_where_the_job_is():
    """A bare Worker handler calling current_job() got "only available inside a running task",
    although it was running one: the handler's argument is its job; current_job() is an app's."""
    from conveyor import current_job  # noqa: PLC0415

    with pytest.raises(LookupError, match=r"a task of a Conveyor app runs.*gets its job as its argument"):
        current_job()
