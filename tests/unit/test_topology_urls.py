"""Parsing of Cluster and Sentinel URLs (pure: no server)."""

from __future__ import annotations

import pytest
from conveyor import InvalidNameError
from conveyor._topology import parse_target


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
