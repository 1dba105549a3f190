"""WaitingPage: the steps of a waiting page, sans I/O (waiting_page.lua runs them)."""

from __future__ import annotations

from conveyor import QueueSettings
from conveyor._inspect import KEY_CHUNK, WaitingPage
from conveyor._ops import QueueCore


def _page(offset: int = 0, limit: int = 5) -> WaitingPage:
    return WaitingPage(QueueCore("q", QueueSettings()), offset, limit)


def test_the_first_step_reads_the_ready_lists_and_nothing_parked_ends_the_page():
    page = _page(offset=3)
    step = page.ready()
    assert step.keys == ("cv:{q}:w",) and step.args == (3, 5)
    step.parse([1, 0, b"7", b"8"])  # two ready ids, offset 1 left over, nothing parked
    assert page.ids == ["7", "8"] and page.next() is None


def test_parked_jobs_are_walked_by_limit_key_in_byte_order_a_chunk_per_step():
    page = _page(offset=2, limit=4)
    page.ready().parse([2, 3, b"1"])  # one ready id, 2 of the offset left, 3 jobs parked
    assert page.next() == "cv:{q}:w:pk"  # the keys that parked a job
    names = [f"k{i:04d}" for i in range(KEY_CHUNK + 5)] + ["é", "B", "a"]
    page.walk({name.encode(): b"1" for name in names})
    step = page.next()
    assert not isinstance(step, str) and step is not None and step.args[:2] == (2, 3)
    assert list(step.args[2:]) == ["B", "a", *names[: KEY_CHUNK - 2]]  # bytes: 'B' < 'a' < 'k..'
    step.parse([0, 2, b"5", b"6"])  # two parked passed, the offset used up
    assert page.ids == ["1", "5", "6"]
    step = page.next()
    assert not isinstance(step, str) and step is not None and step.args[:2] == (0, 1)
    assert list(step.args[2:]) == [*names[KEY_CHUNK - 2 : KEY_CHUNK + 5], "é"]
    step.parse([0, 0])  # nothing parked under these keys
    assert page.next() == "cv:{q}:w:g"  # one parked job unaccounted for: the running keys
    page.walk({b"a": b"2", b"z": b"1"})  # 'a' was walked already
    step = page.next()
    assert not isinstance(step, str) and step is not None and list(step.args[2:]) == ["z"]
    step.parse([0, 1, b"6"])  # read again (it moved meanwhile): listed once
    assert page.ids == ["1", "5", "6"] and page.next() is None  # every parked job passed


def test_once_every_parked_job_is_passed_the_running_keys_are_not_read():
    page = _page(limit=10)
    page.ready().parse([0, 1])
    assert page.next() == "cv:{q}:w:pk"
    page.walk({b"a": b"1"})
    step = page.next()
    assert not isinstance(step, str) and step is not None
    step.parse([0, 1, b"9"])
    assert page.ids == ["9"] and page.next() is None


def test_a_full_page_sends_no_further_step():
    page = _page(limit=1)
    page.ready().parse([0, 4, b"1"])
    assert page.next() is None
