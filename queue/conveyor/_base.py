"""What Queue and AsyncQueue share besides I/O: construction, settings and command lists."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Generic, TypeVar

from ._connection import translate_error
from ._models import QueueSettings
from ._ops import LAYOUT_VERSION, QueueCore

ClientT = TypeVar("ClientT")


def resolve_settings(settings: QueueSettings | None, overrides: dict[str, Any]) -> QueueSettings:
    """Settings given as an object, keyword overrides, or both (overrides win)."""
    return replace(settings or QueueSettings(), **overrides)


class QueueBase(Generic[ClientT]):
    """A named queue bound to a client; the twins add the I/O."""

    def __init__(
        self, name: str, client: ClientT, *, settings: QueueSettings | None = None, **overrides: Any
    ) -> None:
        self.core = QueueCore(name, resolve_settings(settings, overrides))
        self.client = client
        self._ready = False

    @property
    def name(self) -> str:
        return self.core.name

    @property
    def settings(self) -> QueueSettings:
        return self.core.settings

    def _error(self, exc: BaseException) -> Exception:
        pool: Any = getattr(self.client, "connection_pool", None)
        kwargs = getattr(pool, "connection_kwargs", {})
        return translate_error(kwargs, exc, getattr(pool, "max_connections", None))

    def _queue_startup(self, pipe: Any) -> None:
        """Layout version check and maxmemory-policy read, sent as one pipeline."""
        pipe.hsetnx(self.core.keys.meta, "v", LAYOUT_VERSION)
        pipe.hget(self.core.keys.meta, "v")
        pipe.config_get("maxmemory-policy")

    def _queue_counts(self, pipe: Any) -> None:
        k = self.core.keys
        pipe.llen(k.waiting)
        for key in (k.delayed, k.active, k.completed, k.failed):
            pipe.zcard(key)
        pipe.hmget(k.meta, ["completed", "failed"])
