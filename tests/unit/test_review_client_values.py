"""Review of the producer API's value types: bad settings and limits refused with errors naming them."""

from __future__ import annotations

import pytest
from conveyor import Backoff, Conveyor, Limit, Queue, QueueSettings, SerializationError
from conveyor._serialize import JSON, decode_payload


@pytest.mark.parametrize("rate", [10**400, -(10**400)])
def test_a_limit_rate_too_large_for_a_float_is_refused_naming_the_rate(rate):
    """Limit(rate=10**400) raised OverflowError ('int too large to convert to float') from
    math.isfinite instead of the ValueError naming the limit and its rate."""
    with pytest.raises(ValueError, match=r"limit 'k': rate must be at least"):
        Limit("k", rate=rate)


@pytest.mark.parametrize("field", ["lease", "socket_timeout", "result_ttl", "dedup_window", "time_limit"])
def test_a_duration_too_large_for_a_float_is_refused_naming_the_field(field):
    """QueueSettings(lease=10**400) raised OverflowError from math.isfinite instead of listing the
    field among the invalid settings."""
    with pytest.raises(ValueError, match=rf"invalid QueueSettings: {field} must be"):
        QueueSettings(**{field: 10**400})


@pytest.mark.parametrize(("field", "value", "message"), [
    ("backoff", 5, "backoff must be a conveyor.Backoff, got 5"),
    ("backoff", {"base": 1}, "backoff must be a conveyor.Backoff"),
    ("serializer", 5, r"serializer must have dumps\(\) and loads\(\) methods, got 5"),
    ("serializer", "json", r"serializer must have dumps\(\) and loads\(\) methods, got 'json'"),
])
def test_a_backoff_or_serializer_of_the_wrong_kind_is_refused_when_the_settings_are_built(field, value,
                                                                                          message):
    """Any object was accepted; it failed only when first used: serializer=5 at the first enqueue
    (AttributeError: 'int' object has no attribute 'dumps', not a SerializationError), backoff=5 at
    a job's first failure, inside a worker."""
    with pytest.raises(ValueError, match=rf"invalid QueueSettings: {message}"):
        QueueSettings(**{field: value})
    with pytest.raises(ValueError, match=message):
        Queue.from_url("redis://127.0.0.1:1/0", "q", **{field: value})


def test_good_backoff_and_serializer_are_still_accepted():
    import pickle  # noqa: PLC0415 - a module with dumps/loads is a serializer too

    assert QueueSettings(backoff=Backoff(base=2), serializer=pickle).serializer is pickle


@pytest.mark.parametrize("settings", [{"lease": 5}, Backoff()])
def test_settings_that_are_not_queue_settings_are_refused_naming_the_argument(settings):
    """A dict given as settings= failed in dataclasses.replace ('replace() should be called on
    dataclass instances'), naming neither the argument nor what it takes; another dataclass (a
    Backoff) was copied into an object with the wrong fields."""
    for build in (lambda: Queue.from_url("redis://127.0.0.1:1/0", "q", settings=settings),
                  lambda: Conveyor("redis://127.0.0.1:1/0", settings=settings)):
        with pytest.raises(TypeError, match=r"settings must be a conveyor\.QueueSettings"):
            build()


@pytest.mark.parametrize("text", [b"NaN", b"[1, Infinity]", b'{"x": -Infinity}'])
def test_the_json_serializer_refuses_nan_and_infinity_when_it_reads_too(text: bytes) -> None:
    """Its docstring says it rejects NaN and Infinity, which are not JSON; it refused to write
    them but read them from a payload another producer stored (json's default)."""
    with pytest.raises(SerializationError, match="is not JSON"):
        decode_payload(JSON, "j1", text)
    assert decode_payload(JSON, "j1", b'{"x": 1.5e300}') == {"x": 1.5e300}
