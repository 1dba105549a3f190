"""Parsing of Cluster and Sentinel URLs (pure: no server)."""

from __future__ import annotations

import re

import pytest
from conveyor import AsyncQueue, Conveyor, InvalidNameError, Queue
from conveyor._topology import check_url, parse_target


def test_plain_urls_are_single_servers() -> None:
    assert parse_target("redis://h:1/2").kind == "single"
    assert parse_target("rediss://h:1").kind == "single"


def test_cluster_url_lists_every_startup_node_and_keeps_credentials_and_options() -> None:
    target = parse_target("rediss+cluster://u:p@a:1,b:2,[::1]:3?ssl_cert_reqs=none")
    assert target.kind == "cluster"
    assert target.hosts == (("a", 1), ("b", 2), ("::1", 3))
    assert target.url == "rediss://u:p@a:1/?ssl_cert_reqs=none"


def test_sentinel_url_names_the_service_and_the_db() -> None:
    target = parse_target("redis+sentinel://s1:26379,s2:26380/mymaster/3")
    assert (target.kind, target.service, target.hosts) == (
        "sentinel",
        "mymaster",
        (("s1", 26379), ("s2", 26380)),
    )
    assert target.url == "redis://s1:26379/3"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://s1:26379", "service name"),
        ("redis+cluster://", "names no host"),
        ("redis+cluster://a:1,b", "host:port"),
        ("memcached://a:1", "scheme"),
    ],
)
def test_bad_urls_name_the_problem(url: str, message: str) -> None:
    with pytest.raises(InvalidNameError, match=message):
        parse_target(url)


def test_errors_never_echo_the_password() -> None:
    with pytest.raises(InvalidNameError) as info:
        parse_target("redis+cluster://u:secret@a:1,b")
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("redis://h:1/x", "x"),
        ("redis://h:1/0x", "0x"),
        ("rediss://h:1/1/2", "1/2"),
        ("redis://h:1/1_0", "1_0"),
        ("redis+sentinel://s1:26379/mymaster/x", "x"),
        ("redis+sentinel://s1:26379/mymaster/1/2", "1/2"),
        ("redis+cluster://a:1,b:2/x", "x"),
    ],
)
def test_a_database_path_that_is_not_a_number_is_refused(url: str, path: str) -> None:
    """redis-py reads no db from such a path and used db 0 without a word (int('1_0') is 10)."""
    with pytest.raises(InvalidNameError, match=rf"database {path!r}: .* must be a database number"):
        parse_target(url)


def test_a_cluster_url_naming_a_database_other_than_0_is_refused() -> None:
    """Cluster has only db 0: the db of the URL was dropped and db 0 used."""
    with pytest.raises(InvalidNameError, match="Cluster has only database 0"):
        parse_target("redis+cluster://a:1,b:2/3")
    assert parse_target("redis+cluster://a:1,b:2/0").kind == "cluster"


@pytest.mark.parametrize("url", ["redis://h:1", "redis://h:1/", "redis://h:1/15", "unix:///tmp/r.sock"])
def test_database_numbers_and_no_database_are_accepted(url: str) -> None:
    assert parse_target(url).kind == "single"


def test_a_bad_database_error_does_not_echo_the_password() -> None:
    with pytest.raises(InvalidNameError) as info:
        parse_target("redis://admin:s3cret@h:1/x")
    assert "s3cret" not in str(info.value) and "admin" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        ("localhost:6379", InvalidNameError, "scheme"),
        ("redis://u:secret@h:1/db", InvalidNameError, "database 'db'"),
        ("redis://h:1/0?socket_timeout=soon", ValueError, "socket_timeout"),
        ("redis+cluster://a:1,b", InvalidNameError, "host:port"),
        (None, TypeError, "url must be a str"),
    ],
)
def test_an_app_refuses_a_bad_url_when_it_is_created(url: object, error: type, message: str) -> None:
    """The app kept any URL and the error came at its first enqueue or worker start: in a web
    application, at the first request that enqueued, long after the deployment looked healthy."""
    with pytest.raises(error, match=message) as info:
        Conveyor(url)  # type: ignore[arg-type]
    assert "secret" not in str(info.value)


@pytest.mark.parametrize("twin", [Queue, AsyncQueue])
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:1/0?socket_timout=5", "option 'socket_timout' (did you mean 'socket_timeout'?)"),
        ("redis+cluster://127.0.0.1:1,127.0.0.1:2?helth_check_interval=3", "option 'helth_check_interval'"),
        ("redis://127.0.0.1:1/0?protocol=9", "protocol 9: use 2 or 3"),
        ("rediss://127.0.0.1:1/0?ssl_cert_reqs=bogus", "ssl_cert_reqs='bogus': use none, optional, required"),
    ],
)
def test_a_misspelt_or_impossible_url_option_is_refused_by_name_before_any_call(twin, url, message) -> None:
    """redis-py hands unknown query options to each connection: a misspelt one was accepted and
    the first call failed with a bare TypeError; protocol=9 failed as 'cannot reach the server'."""
    with pytest.raises(InvalidNameError, match=re.escape(message)):
        twin.from_url(url, "q")
    with pytest.raises(InvalidNameError, match=re.escape(message)):
        Conveyor(url)


def test_url_options_of_the_connections_and_pools_are_accepted() -> None:
    url = "redis://127.0.0.1:1/0?socket_timeout=5&health_check_interval=3&protocol=3&max_connections=4"
    Conveyor(url)
    Queue.from_url(url, "q").close()
    check_url("rediss://127.0.0.1:1/0?ssl_cert_reqs=none&ssl_ca_certs=/tmp/ca.pem")
    check_url("unix:///tmp/valkey.sock?db=1")


@pytest.mark.parametrize(
    "url", ["redis://local host:6379/0", "redis+cluster://a:1,b :2", "redis://u:p w@h\x00:1"]
)
def test_a_host_with_a_space_or_control_character_is_refused_when_the_app_is_built(url) -> None:
    """No client can reach such a host; the URL was accepted and only the first call failed.
    (Tabs and newlines are another matter: urllib drops them, for redis-py too.)"""
    with pytest.raises(InvalidNameError, match="space or control character in its host") as refused:
        Conveyor(url)
    assert "p w" not in str(refused.value)
