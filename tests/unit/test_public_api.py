"""The package's public surface, without a server: imports, exports and sync/async parity."""

from __future__ import annotations

import builtins
import inspect
import os
import queue
import re
import subprocess
import sys
import types
import typing
from pathlib import Path

import conveyor
import pytest
import redis
import redis.asyncio as aredis
from conveyor import (
    AsyncQueue,
    AsyncWorker,
    ConnectionFailedError,
    ConveyorError,
    InvalidNameError,
    Queue,
    Worker,
    _errors,
)

ROOT = Path(__file__).resolve().parents[2]


def test_import_queue_is_the_standard_library_module():
    assert not (ROOT / "queue" / "__init__.py").exists()
    assert hasattr(queue, "Queue") and hasattr(queue, "SimpleQueue")
    # in a fresh interpreter with the documented PYTHONPATH (queue/ and the repo root first)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "queue"), str(ROOT)])}
    code = "import queue, conveyor; print(queue.Queue.__module__, hasattr(queue, '__file__'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    assert out == ["queue", "True"]


def test_all_is_sorted_and_complete():
    exported = conveyor.__all__
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(conveyor, name), name
        assert not name.startswith("_") or name == "__version__", f"private name exported: {name}"
    public = {
        name for name, value in vars(conveyor).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(exported) - {"__version__"}


def test_every_error_is_exported_and_derives_from_conveyor_error():
    errors = {
        name for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
        and value.__module__ == _errors.__name__
    }
    assert errors <= set(conveyor.__all__)
    for name in errors:
        assert issubclass(getattr(conveyor, name), ConveyorError)
    assert issubclass(ConnectionFailedError, ConnectionError)
    assert issubclass(InvalidNameError, ValueError)


def test_version_is_a_string():
    assert isinstance(conveyor.__version__, str)
    assert conveyor.__version__.count(".") >= 1


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: value for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def _params(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize(("sync_cls", "async_cls"), [(Queue, AsyncQueue), (Worker, AsyncWorker)])
def test_sync_and_async_twins_are_in_step(sync_cls, async_cls):
    sync_methods = _public_methods(sync_cls)
    async_methods = _public_methods(async_cls)
    renamed = {"close": "aclose"}
    assert {renamed.get(n, n) for n in sync_methods} == set(async_methods)
    for name, sync_member in sync_methods.items():
        async_member = async_methods[renamed.get(name, name)]
        if isinstance(sync_member, property):
            assert isinstance(async_member, property), name
            continue
        assert _params(sync_member) == _params(async_member), f"{sync_cls.__name__}.{name}"
        assert (sync_member.__doc__ or "").strip(), f"{sync_cls.__name__}.{name} has no docstring"
        raw = inspect.getattr_static(async_cls, renamed.get(name, name))
        is_classmethod = isinstance(raw, classmethod)
        if name in ("stop", "from_url") or is_classmethod:
            assert not inspect.iscoroutinefunction(async_member), name
        else:
            assert inspect.iscoroutinefunction(async_member), f"{async_cls.__name__}.{name} is not async"
            assert not inspect.iscoroutinefunction(sync_member), name


def _offline_queue() -> Queue:
    return Queue("q", redis.Redis(host="127.0.0.1", port=1))  # never connects in these tests


def test_worker_rejects_handlers_of_the_wrong_kind():
    async def coro(job):
        return None

    def plain(job):
        return None

    q = _offline_queue()
    aq = AsyncQueue("q", aredis.Redis(host="127.0.0.1", port=1))
    with pytest.raises(TypeError, match="must be a plain"):
        Worker(q, {"t": coro})
    with pytest.raises(TypeError, match="must be an async def"):
        AsyncWorker(aq, {"t": plain})
    with pytest.raises(TypeError, match="not callable"):
        Worker(q, {"t": 42})
    with pytest.raises(InvalidNameError):
        Worker(q, {"a{b}": plain})
    with pytest.raises(InvalidNameError):
        AsyncWorker(aq, {"": coro})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be an int in 1..1000"),
        ({"concurrency": 1001}, "concurrency must be an int in 1..1000"),
        ({"prefetch": -1}, "prefetch must be an int in 0..1000"),
        ({"shutdown_timeout": -1}, "shutdown_timeout must be >= 0"),
        ({"block_timeout": 0}, "block_timeout must be a finite number of seconds > 0"),
    ],
)
def test_worker_options_are_validated(options, message):
    with pytest.raises(ValueError, match=message):
        Worker(_offline_queue(), {"t": lambda job: None}, **options)


def test_worker_rejects_unknown_options():
    with pytest.raises(TypeError):
        Worker(_offline_queue(), {"t": lambda job: None}, concurency=2)


def test_queue_names_are_validated_at_construction():
    client = redis.Redis(host="127.0.0.1", port=1)
    for bad in ("", "a{b", "a}b"):
        with pytest.raises(InvalidNameError):
            Queue(bad, client)
        with pytest.raises(InvalidNameError):
            AsyncQueue(bad, aredis.Redis(host="127.0.0.1", port=1))
        with pytest.raises(InvalidNameError):
            Queue("ok", client, prefix=bad)


def _public_callables():
    """Every exported function, and each exported class's constructor and public methods."""
    for name in conveyor.__all__:
        value = getattr(conveyor, name)
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value) and not issubclass(value, BaseException):
            for attr, member in vars(value).items():
                func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if inspect.isfunction(func) and (attr == "__init__" or not attr.startswith("_")):
                    yield f"{name}.{attr}", func


_MISSING = object()


def _private_names(func) -> list[str]:
    """Names in ``func``'s annotations that are Conveyor's but not exported: a user's type checker
    and the API page would show ``conveyor._module.Name``, which a user cannot import or name."""
    module = sys.modules[func.__module__]
    found = []
    for annotation in inspect.get_annotations(func).values():
        names = re.findall(r"[A-Za-z_][\w.]*", re.sub(r"'[^']*'|\"[^\"]*\"", "", str(annotation)))
        for root in {name.split(".")[0] for name in names}:  # (Literal strings left out)
            value = vars(module).get(root, getattr(builtins, root, _MISSING))
            exported = root in conveyor.__all__ and value in (_MISSING, getattr(conveyor, root))
            if value is _MISSING and not exported:
                found.append(root)  # imported for type checking only, from a private module
            elif isinstance(value, typing.TypeVar | typing.ParamSpec):
                continue  # a type variable: the signature's own
            elif getattr(value, "__module__", "").startswith("conveyor.") and not exported:
                found.append(root)
    return found


def test_public_signatures_name_only_public_or_standard_types():
    """waiter= was typed MarkerWaiter / AsyncMarkerWaiter and instrument() / instrument_tracing()
    returned Metrics / Tracing: none exported, so the API page showed conveyor._waiter.MarkerWaiter."""
    private = {name: names for name, func in _public_callables() if (names := _private_names(func))}
    # Conveyor.task() builds a Task (a user never calls Task()), from its TaskOptions
    assert private == {"Task.__init__": ["TaskOptions"]}
