"""Script calls sent in one round trip per shard, each group optionally followed by WAIT.

Used for the writes that must be replicated (``wait_replicas``) and for enqueueing into several
queues at once. ``WAIT`` counts the replicas holding the writes of *the connection it is sent on*,
so it must follow the scripts on the same connection to the same node: a cluster client would
route a keyless WAIT anywhere. Calls are therefore grouped by the node serving their queue's slot
(one group on a single server or behind Sentinel) and every group is one pipeline on one
connection: ``[ASKING,] EVALSHA ... [, WAIT]``.

A call redirected by ``MOVED`` (the slot map is stale: re-read it) or ``ASK`` (slot migrating),
or refused with ``NOSCRIPT`` or ``TRYAGAIN`` (its slot is migrating and only some of its keys have
moved: the next round waits ``pause()`` first, as redis-py's cluster client does for a lone call),
did not run: it is sent again in the next round, and only it. Any other error is raised once every
group's replies are read. This module holds the state; the twins (``Queue`` and ``AsyncQueue``) do
the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis import exceptions as redis_errors

from ._errors import ConveyorError
from ._ops import Call
from ._scripts import Script, is_noscript
from ._topology import is_cluster

MAX_ROUNDS = 5  # redirections followed before giving up (a slot migrating twice is already rare)
TRYAGAIN_PAUSE = 0.05  # seconds before re-sending a call refused with TRYAGAIN, doubled each time
TRYAGAIN_ROUNDS = 6  # TRYAGAIN rounds waited out (3.15 s in all), besides the MAX_ROUNDS redirections
PENDING = object()
# Errors after which the slot map may name a dead or demoted node: read it again.
REMAP_ERRORS = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ClusterDownError)


@dataclass(eq=False)
class Routed:
    """One script call, where its next attempt goes (ASK target) and its reply once it ran."""

    call: Call[Any]
    ask: tuple[str, int] | None = None
    reply: Any = PENDING


@dataclass(eq=False)
class NodeCommand:
    """A command in the shape redis-py's asyncio ``ClusterNode.execute_pipeline`` reads and fills."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    result: Any = None


class Rounds:
    """What is still to send, grouped by node, and what came back."""

    def __init__(
        self, calls: Sequence[Call[Any]], wait: tuple[Any, ...] | None, check: Callable[[Any], None]
    ) -> None:
        self.items = [Routed(call) for call in calls]
        self.wait, self.check = wait, check
        self.remap = False  # the slot map must be read again before the next round
        self.to_load: dict[str, Script] = {}
        self.busy = 0  # rounds in which a call was refused with TRYAGAIN
        self.sent = 0  # rounds sent
        self._busy_now = False

    @property
    def done(self) -> bool:
        return all(item.reply is not PENDING for item in self.items)

    def replies(self) -> list[Any]:
        return [item.reply for item in self.items]

    def groups(self, client: Any) -> list[tuple[Any, list[Routed]]]:
        """Pending calls by the node serving them; the node is None when there is one server."""
        self.remap = False
        if not is_cluster(client):
            return [(None, [item for item in self.items if item.reply is PENDING])]
        groups: dict[str, tuple[Any, list[Routed]]] = {}
        for item in self.items:
            if item.reply is not PENDING:
                continue
            node = _node(client, item)
            groups.setdefault(node.name, (node, []))[1].append(item)
        return list(groups.values())

    def commands(self, items: list[Routed]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for item in items:
            if item.ask:
                out.append(("ASKING",))
            call = item.call
            out.append(("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args))
        if self.wait:
            out.append(self.wait)
        return out

    def settle(self, items: list[Routed], replies: Sequence[Any]) -> None:
        """Record one group's replies (in ``commands`` order); redirected calls stay pending.

        Raises the first error that is not a redirection or NOSCRIPT, then a WAIT that fell short.
        """
        errors: list[BaseException] = []
        position = 0
        for item in items:
            position += 1 if item.ask else 0
            reply = replies[position]
            position += 1
            item.ask = None
            if isinstance(reply, redis_errors.MovedError):  # a subclass of AskError: test it first
                self.remap = True
            elif isinstance(reply, redis_errors.AskError):
                item.ask = (reply.host, int(reply.port))
            elif isinstance(reply, redis_errors.TryAgainError):
                self._busy_now = True
            elif isinstance(reply, BaseException) and is_noscript(reply):
                self.to_load[item.call.script.sha] = item.call.script
            elif isinstance(reply, BaseException):
                errors.append(reply)
            else:
                item.reply = reply
        if self.wait and isinstance(replies[position], BaseException):
            errors.append(replies[position])
        if errors:
            raise errors[0]
        if self.wait and any(item.reply is not PENDING for item in items):
            self.check(replies[position])

    def another(self) -> bool:
        """Whether to send a (further) round: up to MAX_ROUNDS redirected ones, and besides them up
        to TRYAGAIN_ROUNDS waited out (a migration in progress counts apart from the MOVED that
        follows its end: counted together, a slow migration used up the redirections)."""
        if self.sent - self.busy >= MAX_ROUNDS or self.busy > TRYAGAIN_ROUNDS:
            return False
        self.sent += 1
        return True

    def pause(self) -> float:
        """Seconds to wait before the next round: none, unless a call was refused with TRYAGAIN
        (a migration moving its slot's keys: give it time to finish)."""
        if not self._busy_now:
            return 0.0
        self._busy_now = False
        self.busy += 1
        return TRYAGAIN_PAUSE * float(2 ** (self.busy - 1)) if self.busy <= TRYAGAIN_ROUNDS else 0.0

    def scripts_to_load(self) -> list[Script]:
        scripts, self.to_load = list(self.to_load.values()), {}
        return scripts

    def gave_up(self) -> ConveyorError:
        return ConveyorError(
            f"a script call was still redirected (MOVED or ASK) after {MAX_ROUNDS} attempts, or refused "
            f"with TRYAGAIN (its slot migrating) {self.busy} times"
        )


def _node(client: Any, item: Routed) -> Any:
    if item.ask:
        node = client.get_node(host=item.ask[0], port=item.ask[1])
        if node is not None:
            return node
    return client.get_node_from_key(item.call.keys[0])
