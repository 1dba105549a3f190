"""Command packing with hiredis for asyncio connections.

redis-py's asyncio ``Connection`` packs every command in Python (one encode call and one bytes
join per argument) even when hiredis is installed, while its sync ``Connection`` packs with
``hiredis.pack_command``. A Conveyor call is an EVALSHA of about twenty arguments, so the
Python packer was a large part of the client CPU of an asyncio enqueue. The subclass packs
with hiredis and hands anything hiredis does not take (bytearray, memoryview, bool, None,
multi-word command names, another encoding) to redis-py's packer: the bytes sent and the
errors raised are the same.
"""

from __future__ import annotations

from typing import Any

pack_command: Any
try:
    import hiredis

    pack_command = hiredis.pack_command
except ImportError:  # hiredis is an optional extra
    pack_command = None

_PACKED: dict[type, type] = {}


def hiredis_packing(cls: type[Any]) -> type[Any]:
    """``cls`` (an asyncio Connection class) packing commands with hiredis when it can."""
    if pack_command is None:
        return cls
    if cls not in _PACKED:

        def pack(self: Any, *args: Any) -> list[bytes]:
            first, encoder = args[0], self.encoder
            if type(first) is str and " " not in first and encoder.encoding == "utf-8":
                try:
                    return [pack_command(args)]
                except (TypeError, ValueError):
                    pass  # redis-py's packer raises its own error (DataError) or copes
            return cls.pack_command(self, *args)  # type: ignore[no-any-return]

        _PACKED[cls] = type(cls.__name__, (cls,), {"pack_command": pack, "__module__": __name__})
    return _PACKED[cls]
