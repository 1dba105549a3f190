"""Pure logic, without a server: keys, retry arithmetic, serialization, settings, URL redaction."""

from __future__ import annotations

import dataclasses
import json
import math
import random

import pytest
from conveyor import (
    Backoff,
    Conveyor,
    InvalidNameError,
    Job,
    JobSpec,
    JSONSerializer,
    Limit,
    PayloadTooLargeError,
    QueueSettings,
    SerializationError,
    redact_url,
)
from conveyor._keys import queue_keys, validate_job_id, validate_name
from conveyor._ops import MAX_ERROR_CHARS, QueueCore, release_flags
from conveyor._replies import whole
from conveyor._retry import retry_delay_ms
from conveyor._serialize import JSON, encode_payload
from redis.crc import key_slot

# -- keys -----------------------------------------------------------------------------------------


def _all_keys(keys) -> list[str]:
    return [getattr(keys, f.name) for f in dataclasses.fields(keys)] + [keys.job("42"), keys.job("a-b")]


def test_every_key_shares_one_hash_tag():
    keys = queue_keys("cv", "emails")
    names = _all_keys(keys)
    assert len(set(names)) == len(names)
    for name in names:
        assert name.startswith("cv:{emails}:")
        assert name.count("{") == 1 and name.count("}") == 1
    assert len({key_slot(n.encode()) for n in names}) == 1
    assert keys.job("42") == keys.jobs + "42"


def test_queues_and_prefixes_do_not_share_keys():
    a, b, c = queue_keys("cv", "a"), queue_keys("cv", "b"), queue_keys("other", "a")
    assert not set(_all_keys(a)) & set(_all_keys(b))
    assert not set(_all_keys(a)) & set(_all_keys(c))
    assert a.meta.startswith("other:") is False and c.meta.startswith("other:{a}:")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "must not be empty"),
        ("a{b", "must not contain"),
        ("a}b", "must not contain"),
        ("{a}", "hash tag"),
        ("x" * 201, "limit is 200"),
        (None, "must be a string"),
        (42, "must be a string"),
    ],
)
def test_bad_names_are_refused(name, message):
    with pytest.raises(InvalidNameError, match=message):
        queue_keys("cv", name)
    with pytest.raises(InvalidNameError, match=message):
        queue_keys(name, "q")
    with pytest.raises(InvalidNameError, match=message):
        validate_name("task", name)


def test_names_may_use_other_punctuation():
    for ok in ("emails", "a:b", "a-b.c_d", "ü", "x" * 200, "with space"):
        assert validate_name("queue", ok) == ok
        queue_keys("cv", ok)


@pytest.mark.parametrize("job_id", ["1", "0042", "99999999999999999999", "٣"])
def test_digit_only_job_ids_are_reserved(job_id):
    with pytest.raises(InvalidNameError, match="only of digits"):
        validate_job_id(job_id)


def test_other_job_ids_are_accepted():
    for job_id in ("a1", "1a", "-1", "1.5", "order:42", "x"):
        assert validate_job_id(job_id) == job_id
    for bad in ("", "a{", "}"):
        with pytest.raises(InvalidNameError):
            validate_job_id(bad)


# -- retry arithmetic -------------------------------------------------------------------------------


def test_backoff_without_jitter_is_exact():
    b = Backoff(base=0.5, factor=3.0, cap=10.0, jitter=0.0)
    assert [b.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert b.delay(0) == 0.5  # attempt numbers below 1 behave like the first retry


@pytest.mark.parametrize("jitter", [0.0, 0.25, 0.5, 1.0])
def test_backoff_stays_within_its_bounds(jitter):
    b = Backoff(base=0.2, factor=2.0, cap=5.0, jitter=jitter)
    rng = random.Random(7)
    for attempt in range(1, 30):
        raw = min(5.0, 0.2 * 2.0 ** (attempt - 1))
        for _ in range(50):
            d = b.delay(attempt, rng)
            assert raw * (1 - jitter) - 1e-12 <= d <= raw + 1e-12
    assert b.delay(1000) <= 5.0  # no overflow for huge attempt numbers


def test_backoff_jitter_spreads_delays():
    b = Backoff(base=1.0, jitter=0.5)
    rng = random.Random(1)
    samples = [b.delay(1, rng) for _ in range(200)]
    assert max(samples) - min(samples) > 0.3


@pytest.mark.parametrize(
    "kwargs",
    [{"base": -1}, {"cap": -0.1}, {"factor": 0.5}, {"jitter": -0.1}, {"jitter": 1.5},
     # inf and NaN passed, then every retry failed for good at its first failure
     {"cap": float("inf")}, {"base": float("nan")}, {"factor": float("inf")}, {"cap": 1e10},
     {"jitter": float("nan")}, {"base": "1"}, {"cap": True}],
)
def test_backoff_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError, match="invalid backoff"):
        Backoff(**kwargs)


def test_retry_delay_ms():
    policy = Backoff(base=0.1, factor=2.0, cap=1.0, jitter=0.5)
    assert retry_delay_ms(policy, 1, 3, retry=False) == -1
    assert retry_delay_ms(policy, 3, 3, retry=True) == -1
    assert retry_delay_ms(policy, 4, 3, retry=True) == -1
    for attempts, raw_ms in ((1, 100), (2, 200), (3, 400), (5, 1000), (9, 1000)):
        for _ in range(50):
            ms = retry_delay_ms(policy, attempts, 100, retry=True)
            assert isinstance(ms, int)
            assert raw_ms // 2 - 1 <= ms <= raw_ms
    assert retry_delay_ms(Backoff(base=0.0), 1, 2, retry=True) == 0  # immediate retry


# -- serialization and payload limits -------------------------------------------------------------


def test_json_is_compact_utf8_and_round_trips():
    s = JSONSerializer()
    data = s.dumps({"to": "zoë", "n": [1, 2.5, None, True]})
    assert data == '{"to":"zoë","n":[1,2.5,null,true]}'.encode()
    assert s.loads(data) == {"to": "zoë", "n": [1, 2.5, None, True]}


@pytest.mark.parametrize(
    "payload",
    [{1, 2}, frozenset(), math.nan, {"v": math.inf}, [-math.inf], b"raw", object(), {(1, 2): "x"},
     complex(1, 2)],
    ids=["set", "frozenset", "nan", "inf", "-inf", "bytes", "object", "tuple-key", "complex"],
)
def test_non_json_payloads_are_refused(payload):
    with pytest.raises(SerializationError, match="payload of task 'send' cannot be serialized"):
        encode_payload(JSON, "send", payload, 1024)


def test_payload_size_limit():
    assert encode_payload(JSON, "t", "x" * 10, 12) == b'"' + b"x" * 10 + b'"'  # exactly the limit
    with pytest.raises(PayloadTooLargeError, match="is 12 bytes encoded; the limit is 11 bytes"):
        encode_payload(JSON, "t", "x" * 10, 11)
    # the limit counts encoded bytes, not characters
    with pytest.raises(PayloadTooLargeError, match="is 12 bytes encoded"):
        encode_payload(JSON, "t", "é" * 5, 11)


def test_enqueue_checks_the_configured_limit_before_building_a_call():
    core = QueueCore("q", QueueSettings(max_payload_bytes=100))
    core.enqueue([("t", "x" * 98)])  # 100 bytes encoded
    with pytest.raises(PayloadTooLargeError, match="max_payload_bytes"):
        core.enqueue([("t", "x" * 98), ("t", "x" * 99)])


def test_batches_are_bounded():
    core = QueueCore("q", QueueSettings())
    assert len(core.enqueue([("t", i) for i in range(1000)]).args) == 1 + 5 * 1000  # window, 5 per job
    for size in (0, 1001):
        with pytest.raises(ValueError, match=r"a batch holds 1\.\.1000 jobs"):
            core.enqueue([JobSpec("t")] * size)


def test_error_text_is_truncated():
    core = QueueCore("q", QueueSettings())
    job = Job("1", "t", "active", token="5", attempts=1, max_attempts=3)
    call = core.fail(job, "e" * 10_000, retry=True)
    assert call.args[2] == "e" * MAX_ERROR_CHARS
    assert core.fail(job, KeyError("k"), retry=False).args[2] == "KeyError: 'k'"
    assert core.fail(job, "x", retry=False).args[3] == -1


def test_stored_payload_that_cannot_be_decoded():
    job = Job("7", "t", "active", raw_payload=b"\xff{not json")
    with pytest.raises(SerializationError, match="payload of job '7' cannot be decoded"):
        _ = job.payload
    assert Job("8", "t", "waiting", raw_payload=b'{"a":1}').payload == {"a": 1}
    assert Job("9", "t", "waiting").payload is None


# -- settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lease": 0.01}, r"lease must be a finite number of seconds >= 0\.05, got 0\.01"),
        ({"lease": math.inf}, r"lease must be a finite number of seconds >= 0\.05, got inf"),
        ({"lease": 1e12}, r"lease must be at most 1e\+09 s, got 1000000000000\.0"),
        ({"result_ttl": math.inf}, r"result_ttl must be a finite .* >= 0\.001 \(.*\), got inf"),
        ({"socket_timeout": -1}, "socket_timeout must be a finite number of seconds > 0, got -1"),
        ({"maintenance_interval": math.nan}, "maintenance_interval must be a finite number .* > 0, got nan"),
        ({"failed_max_age": "7d"}, "failed_max_age must be None or a finite .* >= 0, got '7d'"),
        ({"max_attempts": 0}, "max_attempts must be an int >= 1, got 0"),
        ({"max_attempts": 2.5}, r"max_attempts must be an int >= 1, got 2\.5"),
        ({"max_payload_bytes": 0}, "max_payload_bytes must be an int >= 1, got 0"),
        ({"keep_completed": -2}, "keep_completed must be an int >= -1, got -2"),
        ({"keep_failed": True}, "keep_failed must be an int >= -1, got True"),
        ({"maintenance_batch": 0}, r"maintenance_batch must be an int in 1\.\.100000, got 0"),
        ({"maintenance_batch": 100_001}, r"maintenance_batch must be an int in 1\.\.100000, got 100001"),
        ({"pool_size": 0}, "pool_size must be an int >= 1, got 0"),
        ({"pool_size": 2.5}, r"pool_size must be an int >= 1, got 2\.5"),
        ({"protocol": 1}, "protocol must be 2 or 3, got 1"),
        ({"strict": "yes"}, "strict must be True or False, got 'yes'"),
    ],
)
def test_settings_validation_messages(kwargs, message):
    with pytest.raises(ValueError, match=f"^invalid QueueSettings: {message}"):
        QueueSettings(**kwargs)


def test_settings_report_every_problem_at_once():
    with pytest.raises(ValueError) as info:
        QueueSettings(lease=0, pool_size=0, protocol=4)
    message = str(info.value)
    for part in ("lease must be", "pool_size must be", "protocol must be 2 or 3"):
        assert part in message
    assert message.count(";") == 2


def test_settings_defaults_and_immutability():
    s = QueueSettings()
    assert (s.prefix, s.lease, s.max_attempts, s.max_payload_bytes, s.keep_completed, s.protocol) == (
        "cv", 30.0, 3, 512 * 1024, 0, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lease = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        QueueSettings(no_such_setting=1)  # type: ignore[call-arg]


# -- URL redaction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://user:secret@127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:secret@localhost:6380/2", "redis://localhost:6380/2"),
        ("rediss://default:s3cr%40t@host.example/1?ssl_cert_reqs=none",
         "rediss://host.example/1?ssl_cert_reqs=none"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://user@host:1/0", "redis://host:1/0"),
        ("redis://u:p@[::1]:6379/0", "redis://[::1]:6379/0"),
        ("redis://h:1/0?protocol=3&password=secret", "redis://h:1/0?protocol=3&password=***"),
        ("redis://h:1/0?username=alice&password=secret", "redis://h:1/0?username=***&password=***"),
    ],
)
def test_redact_url(url, expected):
    redacted = redact_url(url)
    assert redacted == expected
    assert "secret" not in redacted and "s3cr" not in redacted


def test_task_priority_default_and_override():
    app = Conveyor("redis://localhost:1")

    @app.task(priority=3)
    def urgent(x: int) -> int:
        return x

    @app.task
    def plain(x: int) -> int:
        return x

    assert urgent.spec(1).priority == 3
    assert plain.spec(1).priority == 0
    assert urgent.with_options(priority=8).spec(1).priority == 8
    assert urgent.with_options(priority=0).spec(1).priority == 0
    with pytest.raises(ValueError, match=r"priority must be an int in 0\.\.9.*got 12"):
        app.task(priority=12)
    with pytest.raises(ValueError, match="got -1"):
        urgent.with_options(priority=-1)


@pytest.mark.parametrize(
    ("job", "priority"),
    [(("t", {"a": 1}, None, 0.0, None), 0), (("t", [1], "my-id", 2.5, 7), 9)],
)
def test_enqueue_one_sends_and_reads_what_a_one_spec_batch_does(job, priority):
    """The single-job fast path (one packed group) builds the same script call as
    enqueue([JobSpec]) and reads its reply into the same Job, for a created job and an existing one."""
    core = QueueCore("q", QueueSettings())
    one = core.enqueue_packed((core.pack(*job, priority=priority),))
    batch = core.enqueue([JobSpec(*job, priority)])
    assert (one.script, one.keys, list(one.args)) == (batch.script, batch.keys, list(batch.args))
    created = [1_700_000_000_123, b"17", 1, b"w"]
    existing = [1_700_000_000_123, b"my-id", 0, b"a", b"other", b'"x"', 2, 5, 1_600_000_000_000,
                b"", b"3", b"", b""]  # fmt: skip
    for reply in (created, existing):
        (got,), (want,) = one.parse(reply), batch.parse(reply)
        assert repr(got) == repr(want)
        fields = ("raw_payload", "max_attempts", "enqueued_at", "created", "priority", "serializer")
        assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields]
    (job_out,) = one.parse(created)
    assert (job_out.id, job_out.task, job_out.state, job_out.priority) == ("17", "t", "waiting", priority)
    assert job_out.enqueued_at == 1_700_000_000.123


def test_a_common_job_sends_five_values_and_options_only_when_set():
    """Each ARGV costs the server about 1k instructions: a job with no delay, priority, time limit
    or key limit sends '' as its options; any of them sends all four in one value."""
    core = QueueCore("q", QueueSettings())
    assert list(core.enqueue([("t", 1)]).args) == [-1, "", "t", b"1", 3, ""]
    spec = JobSpec("t", 1, delay=0.25, priority=2, time_limit=1.5, limit=Limit("k", concurrency=2))
    assert list(core.enqueue([spec]).args)[5] == "250:2:1500:2::k"
    assert list(core.enqueue([JobSpec("t", 1, time_limit=2)]).args)[5] == "0:0:2000:"


@pytest.mark.parametrize("reply", [b"1700000000123{17{w{my-id{d", "1700000000123{17{w{my-id{d"])
def test_an_enqueue_that_created_every_job_is_read_from_one_string_reply(reply):
    """enqueue.lua answers one '{'-joined string (bytes, or str from a decoding client) when every
    job was created: a table reply costs the server about 1.2k instructions per element."""
    core = QueueCore("q", QueueSettings())
    call = core.enqueue([JobSpec("t", {"a": 1}), JobSpec("t", [2], "my-id", 1.5, 7, 3, time_limit=2)])
    first, second = call.parse(reply)
    assert (first.id, first.state, first.payload, first.priority) == ("17", "waiting", {"a": 1}, 0)
    assert first.created and second.created
    assert (second.id, second.state, second.max_attempts, second.priority) == ("my-id", "delayed", 7, 3)
    assert (second.time_limit, second.enqueued_at) == (2, 1_700_000_000.123)


@pytest.mark.parametrize(
    "payload",
    [None, True, 0, -7, 2.5, 1e300, "", "é✓\n\"\\", "\x00\x1f\u2028/", [1, [2, {"a": None}]],
     {"k": {"z": [1.5, "x"]}, "b": False}],
)
def test_the_reused_json_encoder_writes_what_json_dumps_writes(payload):
    """JSONSerializer builds its C encoder once (JSONEncoder.encode builds one per call)."""
    assert JSON.dumps(payload) == json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    assert JSON.dumps(payload) == JSON.dumps(payload)  # nothing left over from the call before


def test_the_reused_json_encoder_refuses_what_json_refuses():
    circular: list = []
    circular.append(circular)
    with pytest.raises(SerializationError, match="Circular reference"):
        encode_payload(JSON, "t", circular, 10_000)
    for bad, message in (
        (float("nan"), "Out of range float"),
        ({"a": {1, 2}}, "not JSON serializable"),
        ("\ud800", "surrogates not allowed"),  # a lone surrogate is not UTF-8 (plain strings too)
    ):
        with pytest.raises(SerializationError, match=message):
            encode_payload(JSON, "t", bad, 10_000)
    shared = {"a": [1, 2]}  # encoded again after the errors: no stale state
    assert encode_payload(JSON, "t", [shared, shared], 10_000) == b'[{"a":[1,2]},{"a":[1,2]}]'


def test_a_scripts_number_text_is_read_with_or_without_an_exponent():
    assert whole("1764748800123") == 1764748800123
    assert whole("1.764748800123e+12") == 1764748800123
    assert whole("0") == 0
    with pytest.raises(ValueError):
        whole("x")


def test_calls_on_leased_jobs_refuse_a_lone_job_a_big_batch_and_a_started_flag_that_is_not_a_bool():
    """release() of 1001 jobs reached the server and failed with its raw 'CONVEYOR_BOUND release
    processed 1001 > batch 1000'; a Job passed instead of a list raised a bare TypeError from
    len(); release(..., started="no") counted as started (any non-empty string is true)."""
    core = QueueCore("q", QueueSettings())
    job = Job("1", "t", "active", token="5", attempts=1, max_attempts=3)
    for build in (lambda jobs: core.release(jobs, release_flags(jobs, False)),
                  lambda jobs: core.extend(jobs, None), core.ack):  # fmt: skip
        with pytest.raises(ValueError, match=r"at most 1000 jobs at once, got 1001"):
            build([job] * 1001)
        with pytest.raises(TypeError, match=r"a list of jobs, got Job"):
            build(job)
    with pytest.raises(TypeError, match=r"a list of jobs, got Job"):
        release_flags(job, False)
    with pytest.raises(TypeError, match=r"started must be True or False, got 'no'"):
        release_flags([job], "no")
    assert release_flags([job, job], True) == [True, True]
