"""Script registry: each transition is one Lua file, sent once with SCRIPT LOAD and run by EVALSHA.

Every script is the shared helpers it uses (``_lua/_lib*.lua``: ``LIBRARY``) followed by one
transition file (only those: a script runs its whole chunk on every call, so each helper it
carries costs a closure per call; see ``_helpers``). A server
that lost its script cache (restart, SCRIPT FLUSH, failover) answers NOSCRIPT; the runner then
loads the script and retries once. The NOSCRIPT prefix is matched, not the message, which differs
between Redis and Valkey.
"""

from __future__ import annotations

import hashlib
import re
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


# The shared library, split by concern; a file may use the definitions of the files before it.
LIBRARY = ("_lib.lua", "_lib_results.lua", "_lib_limits.lua", "_lib_claim.lua")

# A top-level definition of the library: ``local function name(`` or ``local NAME =`` at column 0.
_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# A Lua string literal (kept: its text may be code, as in a KEYS name) or a comment (dropped). Long
# brackets ([[...]]) appear in no Conveyor script.
_STRING_OR_COMMENT = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|--[^\n]*""")


def _code(text: str) -> str:
    """``text`` without its Lua comments: a helper named only in prose is not needed."""
    return _STRING_OR_COMMENT.sub(lambda m: "" if m.group().startswith("--") else m.group(), text)


def _helpers(lib: str, body: str) -> str:
    """The part of ``lib`` that ``body`` needs: its header comment, then every top-level
    definition ``body`` names, directly or through another one, in the lib's order.

    A Lua local can only be reached by its name, so a definition whose name never appears in code
    is dead; comments are not searched (the enqueue script's prose names claim_jobs, which once
    brought 7 helpers it never calls along: 13 closures per call, about 3.7 us of its 16 on Valkey
    9.1). A name seen in a string only keeps a definition that is not needed.
    """
    starts = list(_DEFINITION.finditer(lib))
    if not starts:
        return lib
    blocks = {m.group(1): lib[m.start() : n.start() if n else len(lib)]
              for m, n in zip(starts, [*starts[1:], None], strict=True)}  # fmt: skip
    used: set[str] = set()
    pending = [_code(body)]
    while pending:
        found = set(_IDENTIFIER.findall(pending.pop())) & blocks.keys() - used
        used |= found
        pending += [_code(blocks[name]) for name in found]
    return lib[: starts[0].start()] + "".join(text for name, text in blocks.items() if name in used)


_LIBRARY = "".join(_read(name) for name in LIBRARY)


def _build(name: str) -> Script:
    body = _read(f"{name}.lua")
    source = _helpers(_LIBRARY, body) + "\n" + body
    return Script(name, source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())


class Scripts(Enum):
    """All transitions, loaded from the package once at import time."""

    ENQUEUE = _build("enqueue")
    CLAIM = _build("claim")
    ACK = _build("ack")
    FAIL = _build("fail")
    HOLD = _build("hold")
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
    READ_RESULTS = _build("read_results")


def is_noscript(error: BaseException) -> bool:
    """True when the server no longer holds the script.

    redis-py maps replies starting with NOSCRIPT to NoScriptError (and strips the prefix); other
    clients may hand the raw message through, so match the prefix too, never the message text.
    """
    return isinstance(error, NoScriptError) or str(error).startswith("NOSCRIPT")
