"""The grouped send's state (conveyor._grouped.Rounds): redirections, NOSCRIPT, WAIT replies."""

from __future__ import annotations

from typing import Any

import pytest
from conveyor._errors import ReplicationError
from conveyor._grouped import Rounds
from conveyor._models import QueueSettings
from conveyor._ops import QueueCore
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError

WAIT = ("WAIT", 1, 1000)


def _rounds(n: int, wait: tuple[Any, ...] | None = WAIT) -> Rounds:
    calls = [QueueCore(f"q{i}", QueueSettings()).enqueue([("t", i)]) for i in range(n)]

    def check(acked: Any) -> None:
        if int(acked) < 1:
            raise ReplicationError("short")

    return Rounds(calls, wait, check)


def test_commands_are_the_scripts_then_wait() -> None:
    rounds = _rounds(2)
    [(node, items)] = rounds.groups(object())  # not a cluster client: one group
    commands = rounds.commands(items)
    assert node is None and [c[0] for c in commands] == ["EVALSHA", "EVALSHA", "WAIT"]
    rounds.settle(items, ["a", "b", 1])
    assert rounds.done and rounds.replies() == ["a", "b"]


def test_redirected_and_noscript_calls_stay_pending_and_only_they() -> None:
    rounds = _rounds(3)
    [(_, items)] = rounds.groups(object())
    rounds.settle(items, [MovedError("12 127.0.0.1:7001"), AskError("12 127.0.0.1:7002"),
                          NoScriptError("gone"), 1])  # fmt: skip
    assert not rounds.done and rounds.remap
    assert items[1].ask == ("127.0.0.1", 7002)
    assert [s.name for s in rounds.scripts_to_load()] == ["enqueue"]
    [(_, again)] = rounds.groups(object())
    assert again == items and [c[0] for c in rounds.commands(again)][:3] == ["EVALSHA", "ASKING", "EVALSHA"]
    rounds.settle(again, ["a", "OK", "b", "c", 1])
    assert rounds.replies() == ["a", "b", "c"]


def test_other_errors_and_short_waits_are_raised() -> None:
    rounds = _rounds(1)
    [(_, items)] = rounds.groups(object())
    with pytest.raises(ResponseError, match="boom"):
        rounds.settle(items, [ResponseError("boom"), 1])
    rounds = _rounds(1)
    [(_, items)] = rounds.groups(object())
    with pytest.raises(ReplicationError):
        rounds.settle(items, ["a", 0])


def test_without_wait_there_is_no_wait_command() -> None:
    rounds = _rounds(1, wait=None)
    [(_, items)] = rounds.groups(object())
    assert [c[0] for c in rounds.commands(items)] == ["EVALSHA"]
    rounds.settle(items, ["a"])
    assert rounds.replies() == ["a"]
