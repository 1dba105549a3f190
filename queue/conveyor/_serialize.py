"""Payload serialization. JSON by default; nothing is ever unpickled unless a caller plugs it in."""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Protocol

from ._errors import PayloadTooLargeError, SerializationError


class Serializer(Protocol):
    """Turns payloads into bytes and back. Implementations must be safe for untrusted input."""

    def dumps(self, payload: Any) -> bytes:
        """Encode a payload."""
        ...

    def loads(self, data: bytes) -> Any:
        """Decode a stored payload."""
        ...


class JSONSerializer:
    """Compact UTF-8 JSON; rejects NaN and Infinity, which are not JSON."""

    def __init__(self) -> None:
        encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._encode = encoder.encode
        # JSONEncoder.encode builds a C encoder (and a dict of the containers being encoded) on
        # every call: about half the cost of encoding a small payload. This one is built once,
        # without that dict (it would be shared by threads, and an error leaves it dirty), so a
        # circular payload exhausts the recursion limit instead: reported as json's ValueError.
        self._c_encode = c_make_encoder and c_make_encoder(
            None, encoder.default, encode_basestring, None, ":", ",", False, False, False
        )
        # json reads NaN, Infinity and -Infinity by default: a payload another producer wrote with
        # them is refused, as this serializer never writes them.
        self._decode = json.JSONDecoder(parse_constant=_not_json).decode

    def dumps(self, payload: Any) -> bytes:
        if type(payload) is str:  # a plain string (the commonest result): no encoder, list or join
            return encode_basestring(payload).encode()
        if self._c_encode is None:  # an interpreter without json's C accelerator
            return self._encode(payload).encode()
        try:
            return "".join(self._c_encode(payload, 0)).encode()
        except RecursionError:
            raise ValueError("Circular reference detected (or nesting past the recursion limit)") from None

    def loads(self, data: bytes) -> Any:
        # Stored payloads are always UTF-8: skip json.loads' encoding detection.
        return self._decode(data.decode() if isinstance(data, bytes) else data)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


JSON = JSONSerializer()


def encode_payload(serializer: Serializer, task: str, payload: Any, limit: int) -> bytes:
    """Encode ``payload`` for ``task``, enforcing the size limit with errors that name the problem."""
    try:
        data = serializer.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"payload of task {task!r} cannot be serialized ({type(payload).__name__}): {exc}"
        ) from exc
    if len(data) > limit:
        raise PayloadTooLargeError(
            f"payload of task {task!r} is {len(data)} bytes encoded; the limit is {limit} bytes "
            "(QueueSettings.max_payload_bytes)"
        )
    return data


def decode_payload(serializer: Serializer, job_id: str, data: bytes) -> Any:
    """Decode a stored payload; a payload this serializer cannot read raises SerializationError."""
    try:
        return serializer.loads(data)
    except (TypeError, ValueError, UnicodeDecodeError) as exc:
        raise SerializationError(f"payload of job {job_id!r} cannot be decoded: {exc}") from exc
