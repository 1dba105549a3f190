"""Script registry: each transition is one Lua file, sent once with SCRIPT LOAD and run by EVALSHA.

Every script is the shared helpers of ``_lua/_lib.lua`` followed by one transition file. A server
that lost its script cache (restart, SCRIPT FLUSH, failover) answers NOSCRIPT; the runner then
loads the script and retries once. The NOSCRIPT prefix is matched, not the message, which differs
between Redis and Valkey.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from importlib import resources

from redis.exceptions import NoScriptError


def _read(name: str) -> str:
    return resources.files("conveyor").joinpath("_lua", name).read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Script:
    """One atomic state transition."""

    name: str
    source: str
    sha: str


def _build(name: str) -> Script:
    source = _read("_lib.lua") + "\n" + _read(f"{name}.lua")
    return Script(name, source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())


class Scripts(Enum):
    """All transitions, loaded from the package once at import time."""

    ENQUEUE = _build("enqueue")
    CLAIM = _build("claim")
    ACK = _build("ack")
    FAIL = _build("fail")
    EXTEND = _build("extend")
    RELEASE = _build("release")
    PROMOTE = _build("promote")
    RECOVER = _build("recover")
    TRIM = _build("trim")
    CANCEL = _build("cancel")
    FIRE = _build("fire")
    RETRY_FAILED = _build("retry_failed")
    PURGE_FAILED = _build("purge_failed")
    WAITING_PAGE = _build("waiting_page")


def is_noscript(error: BaseException) -> bool:
    """True when the server no longer holds the script.

    redis-py maps replies starting with NOSCRIPT to NoScriptError (and strips the prefix); other
    clients may hand the raw message through, so match the prefix too, never the message text.
    """
    return isinstance(error, NoScriptError) or str(error).startswith("NOSCRIPT")
