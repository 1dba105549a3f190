"""Lua sources, without a server: headers, declared KEYS against what Python passes, bounds."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from conveyor import Job, JobSpec, QueueSettings
from conveyor._inspect import list_range, purge_failed, retry_failed
from conveyor._ops import QueueCore
from conveyor._results import read_call
from conveyor._schedule import Schedule
from conveyor._scheduler import fire_call
from conveyor._scripts import LIBRARY, Scripts, _code, _helpers
from conveyor._sweeps import hold_call, promote_call, recover_call, trim_call

LUA_DIR = resources.files("conveyor").joinpath("_lua")
LUA_FILES = sorted(p.name for p in LUA_DIR.iterdir() if p.name.endswith(".lua"))
TRANSITIONS = [name for name in LUA_FILES if not name.startswith("_")]


def _library() -> str:
    """The shared library as scripts read it: its files in LIBRARY's order."""
    return "".join(LUA_DIR.joinpath(name).read_text(encoding="utf-8") for name in LIBRARY)


def _header(name: str) -> list[str]:
    lines = LUA_DIR.joinpath(name).read_text(encoding="utf-8").splitlines()
    header = []
    for line in lines:
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    return header


def test_there_is_one_file_per_transition():
    assert {f"{s.value.name}.lua" for s in Scripts} == set(TRANSITIONS)
    assert sorted(LIBRARY) == [name for name in LUA_FILES if name.startswith("_")]


@pytest.mark.parametrize("name", LUA_FILES)
def test_every_lua_file_starts_with_a_header(name):
    header = _header(name)
    assert len(header) >= 3, f"{name} has no header comment"
    assert header[0].startswith(name.removesuffix(".lua").lstrip("_")) or header[0].startswith(name)


@pytest.mark.parametrize("name", TRANSITIONS)
def test_transition_headers_name_keys_argv_returns_errors(name):
    text = "\n".join(_header(name))
    for section in ("KEYS:", "ARGV:", "Returns:", "Errors:"):
        assert re.search(rf"^{section}", text, re.MULTILINE), f"{name}: header lacks {section}"


def _calls() -> dict[str, object]:
    core = QueueCore("q", QueueSettings())
    job = Job("1", "t", "active", token="9", attempts=1, max_attempts=3)
    return {
        "enqueue": core.enqueue([JobSpec("t", 1, job_id="a")]),  # a caller's id: every key
        "claim": core.claim(1, None),
        "ack": core.ack([job], 1),
        "fail": core.fail(job, "e", True),
        "hold": hold_call(core, ["9{k"], []),
        "extend": core.extend([job], None),
        "release": core.release([job], [False]),
        "promote": promote_call(core, None),
        "recover": recover_call(core, None),
        "trim": trim_call(core, None),
        "cancel": core.cancel("x"),
        "retry_failed": retry_failed(core, ["a"], 10),
        "purge_failed": purge_failed(core, ["a"], 10),
        "fire": fire_call(core, Schedule("s", "t", "q", every=1), None, 1000, 0),
        "waiting_page": list_range(core, "waiting", 0, 10).ready(),  # type: ignore[union-attr]
        "read_results": read_call(core.keys, ["a"]),
    }


def _declared_keys(name: str) -> list[tuple[str, str]]:
    """The header's numbered KEYS list: its ``KEYS:`` line and the lines continuing the list (they
    start with a key's number; a parenthesised remark after it is not part of the list)."""
    header = _header(name)
    start = next(i for i, h in enumerate(header) if h.startswith("KEYS:"))
    lines = [header[start]]
    for line in header[start + 1 :]:
        if not re.match(r"\d+ \w+", line):
            break
        lines.append(line)
    return re.findall(r"(\d+) (\w+)", " ".join(lines))


@pytest.mark.parametrize("name", TRANSITIONS)
def test_declared_keys_match_what_python_passes(name):
    """The header's numbered KEYS list names the QueueKeys fields Python passes, in order."""
    declared = _declared_keys(name)
    assert [int(n) for n, _ in declared] == list(range(1, len(declared) + 1))
    call = _calls()[name.removesuffix(".lua")]
    core = QueueCore("q", QueueSettings())
    assert [getattr(core.keys, key) for _, key in declared] == list(call.keys)  # type: ignore[attr-defined]
    assert call.script.name == name.removesuffix(".lua")  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", TRANSITIONS)
def test_scripts_use_only_declared_key_slots(name):
    """No KEYS[n] beyond the declared ones, and no key built from a literal string."""
    source = LUA_DIR.joinpath(name).read_text(encoding="utf-8")
    declared = len(_declared_keys(name))
    used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", source)}
    assert used == set(range(1, declared + 1))
    assert not re.search(r"redis\.call\('\w+',\s*'", source), "a key given as a literal string"


def _definitions(source: str) -> list[str]:
    return re.findall(r"^local (?:function )?([A-Za-z_]\w*)", source, re.M)


def test_script_source_is_the_lib_helpers_it_uses_plus_transition_and_sha_is_stable():
    lib = _library()
    order = _definitions(lib)
    for script in Scripts:
        s = script.value
        body = LUA_DIR.joinpath(f"{s.name}.lua").read_text(encoding="utf-8")
        assert s.source.endswith(body)
        helpers = s.source[: -len(body)]
        assert lib.startswith(helpers.split("\nlocal ", 1)[0])  # the lib's header comment first
        carried = _definitions(helpers)
        assert carried == [name for name in order if name in carried]  # the lib's order
        # every lib name the script's code uses is carried (a missing local would be a nil global)
        named = set(re.findall(r"[A-Za-z_]\w*", _code(body + helpers))) & set(order)
        assert named <= set(carried), (s.name, named - set(carried))
        assert re.fullmatch(r"[0-9a-f]{40}", s.sha)
    assert len({s.value.sha for s in Scripts}) == len(Scripts)


@pytest.mark.parametrize("name", LIBRARY)
def test_lib_holds_only_local_definitions(name):
    """Scripts carry the lib's definitions they name (_scripts._helpers): a global function or a
    top-level statement in a library file would ride along with whichever definition precedes it."""
    lib = LUA_DIR.joinpath(name).read_text(encoding="utf-8")
    stray = re.findall(r"^(?!local |end\b|--|\s|$).*", lib, re.M)
    assert stray == [], f"top-level lines of {name} that are not local definitions"


def test_library_definitions_use_only_what_is_defined_before_them():
    """A Lua local is visible only after its definition: a helper naming one defined later (in a
    later library file, or further down) would read a nil global when the script runs."""
    lib = _library()
    starts = list(re.finditer(r"^local (?:function )?([A-Za-z_]\w*)", lib, re.M))
    names = {m.group(1) for m in starts}
    for i, (m, n) in enumerate(zip(starts, [*starts[1:], None], strict=True)):
        block = _code(lib[m.end() : n.start() if n else len(lib)])
        later = set(re.findall(r"[A-Za-z_]\w*", block)) & names - {s.group(1) for s in starts[: i + 1]}
        assert later == set(), f"{m.group(1)} uses {sorted(later)}, defined after it"


def test_helpers_keep_what_is_named_directly_or_through_another_helper():
    lib = (
        "-- header\nlocal N = 3\n-- uses N\nlocal function a()\n  return N\nend\n"
        "local function b()\n  return a()\nend\nlocal function unused()\nend\n"
    )
    kept = _helpers(lib, "return b()")
    assert kept.startswith("-- header\n")
    assert _definitions(kept) == ["N", "a", "b"]
    assert _definitions(_helpers(lib, "return 1")) == []


def test_helpers_named_only_in_comments_are_left_out():
    """Each carried helper costs a closure per call: the enqueue script's comments name claim_jobs,
    and carrying it (and the 6 helpers it calls) cost about 3.7 us of a lone enqueue's 16 on
    Valkey 9.1."""
    lib = ("local function a()\nend\nlocal function b()\n  -- not c()\n  return '--' .. a()\nend\n"
           "local function c()\nend\n")
    assert _definitions(_helpers(lib, "-- b() is not called here\nreturn 1")) == []
    assert _definitions(_helpers(lib, "local s = 'x--' .. b() -- c()")) == ["a", "b"]
    enqueue = Scripts.ENQUEUE.value.source
    assert "local function claim_jobs" not in enqueue and "local function pop_ready" not in enqueue


def test_the_common_enqueue_sends_no_results_key():
    """Generated ids are never reused, so the hot path's call names one key less (each key and
    argument costs the server about 1k instructions)."""
    core = QueueCore("q", QueueSettings())
    assert core.keys.results not in core.enqueue([("t", 1)]).keys
    assert core.keys.results in core.enqueue([("t", 1), JobSpec("t", 2, job_id="a")]).keys
