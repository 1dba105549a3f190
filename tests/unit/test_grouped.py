"""The grouped send's state (conveyor._grouped.Rounds): redirections, NOSCRIPT, WAIT replies."""

from __future__ import annotations

from typing import Any

import pytest
from conveyor._errors import ReplicationError
from conveyor._grouped import Rounds
from conveyor._models import QueueSettings
from conveyor._ops import QueueCore
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError, TryAgainError

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


def _round(rounds: Rounds, reply: Any) -> float:
    """Send one round of a one-call Rounds answered with ``reply``; the pause before the next."""
    assert rounds.another()
    [(_, items)] = rounds.groups(object())
    rounds.settle(items, [reply, 1])
    return rounds.pause()


def test_a_migration_waited_out_does_not_use_up_the_redirections() -> None:
    """TRYAGAIN rounds (pauses doubling from 0.05 s) count apart from MOVED/ASK: a migration that
    took four TRYAGAIN rounds, then the MOVED that ends it, still gets its call through (before,
    one budget of 5 rounds ran out: the Cluster test failed under load)."""
    rounds = _rounds(1)
    pauses = [_round(rounds, TryAgainError("TRYAGAIN")) for _ in range(4)]
    assert pauses == [0.05, 0.1, 0.2, 0.4]
    assert _round(rounds, MovedError("12 127.0.0.1:7001")) == 0.0
    assert _round(rounds, "a") == 0.0 and rounds.done and rounds.replies() == ["a"]


def test_redirections_and_tryagain_rounds_each_have_a_bound() -> None:
    rounds = _rounds(1)
    for _ in range(5):
        _round(rounds, MovedError("12 127.0.0.1:7001"))
    assert not rounds.another()
    rounds = _rounds(1)
    pauses = [_round(rounds, TryAgainError("TRYAGAIN")) for _ in range(7)]
    assert sum(pauses) == pytest.approx(3.15) and pauses[-1] == 0.0  # no pause before giving up
    assert not rounds.another()
    assert "TRYAGAIN (its slot migrating) 7 times" in str(rounds.gave_up())
