"""Errors that name what is wrong and where: schedules, names, current_job()."""

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


@pytest.mark.parametrize(
    ("kind", "bad", "message"),
    [
        ("job id", "", "job id must not be empty"),
        ("job id", 5, "job id must be a string, got int"),
        ("prefix", "a{b", "prefix 'a{b' must not contain"),
        ("queue name", "", "queue name must not be empty"),
    ],
)
def test_a_bad_name_is_named_once(kind, bad, message):
    """It said "job id name must not be empty" and "prefix name ...": every kind got " name"."""
    from conveyor import InvalidNameError  # noqa: PLC0415
    from conveyor._keys import validate_name  # noqa: PLC0415

    with pytest.raises(InvalidNameError) as caught:
        validate_name(kind, bad)
    assert str(caught.value).startswith(message)
