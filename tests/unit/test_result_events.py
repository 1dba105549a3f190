"""The events stream's entries as result readers parse them: the batched layout (one field per
call) and the layout written before it (one field per job id), in RESP2 and RESP3 shapes."""

from __future__ import annotations

from conveyor._results import finished_ids


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
