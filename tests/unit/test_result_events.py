"""The events stream's entries as result readers parse them: the batched layout (one field per
call) and the layout written before it (one field per job id), in RESP2 and RESP3 shapes."""

from __future__ import annotations

from conveyor._results import READ_COUNT, Registry, events_read, finished_ids, settled


def test_a_batched_entry_names_each_of_its_ids():
    reply = [[b"q:ev", [(b"1-0", [b"{c", b"7{8{job-a"]), (b"2-0", [b"{f", b"9"])]]]
    assert finished_ids(reply) == (["7", "8", "job-a", "9"], "2-0")


def test_entries_written_before_name_ids_as_fields():
    reply = [[b"q:ev", [(b"1-0", [b"7", b"c", b"8", b"c"]), (b"2-0", [b"{c", b"9"])]]]
    assert finished_ids(reply) == (["7", "8", "9"], "2-0")


def test_resp3_dict_fields():
    reply = {b"q:ev": [[(b"3-1", {b"{c": b"a{b"}), (b"4-0", {b"old": b"c"})]]}
    assert finished_ids(reply) == (["a", "b", "old"], "4-0")


def test_no_entries():
    assert finished_ids(None) == ([], None)
    assert finished_ids([]) == ([], None)


def _reply(entries: int, first_ids: list[str]) -> list:
    """An XREAD reply of ``entries`` entries, the first naming ``first_ids`` (RESP2 shape)."""
    named = ["{".join(first_ids)] + [f"other-{n}" for n in range(2, entries + 1)]
    rows = [(f"{n}-0", ["{c", ids]) for n, ids in enumerate(named, start=1)]
    return [["ev", rows]]


def test_a_short_read_asks_only_for_the_announced_jobs_somebody_waits_for():
    registry: Registry[object] = Registry()
    registry.add("7", object())
    registry.add("8", object())
    read = events_read(registry, _reply(3, ["7", "9"]), 60.0)
    assert (read.wanted, read.announced, read.last) == (["7"], {"7", "9", "other-2", "other-3"}, "3-0")
    assert settled(read, [None]) == [("7", None)]  # announced: a missing record expired


def test_a_full_read_may_be_behind_the_cap_so_every_waiter_is_probed():
    """The stream is capped near 1,000 entries: a reader behind it (a reconnect, a busy fleet)
    finds the events after its position trimmed, and its read then returns a full batch. Before,
    the waiters whose events were trimmed waited until their timeout (or for ever)."""
    registry: Registry[object] = Registry()
    for job_id in ("7", "8", "5"):
        registry.add(job_id, object())
    read = events_read(registry, _reply(READ_COUNT, ["7"]), 60.0)
    assert read.wanted == ["7", "8", "5"]
    assert settled(read, [b"c:1", b"c:2", None]) == [("7", b"c:1"), ("8", b"c:2")]  # 5: still running


def test_every_waiter_is_read_again_at_least_once_per_block_while_events_keep_coming():
    """A job finished without a record (store_results off where it finished) is never announced:
    only an idle read (none while other jobs keep finishing) read it again before, so its waiters
    waited until their timeout on a busy queue."""
    registry: Registry[object] = Registry()
    for job_id in ("7", "5"):
        registry.add(job_id, object())
    read = events_read(registry, _reply(3, ["7"]), 0.0)
    assert (read.wanted, read.announced, read.last) == (["7", "5"], {"7", "5"}, "3-0")
    assert settled(read, [b"c:1", None]) == [("7", b"c:1"), ("5", None)]  # 5: finished, no record
    assert events_read(registry, _reply(3, ["7"]), 60.0).wanted == ["7"]  # swept just now
