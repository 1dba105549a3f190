"""Conveyor under a least-privilege ACL user: `conveyor.acl_rules()` is enough, and nothing less is.

The rules are what the docs tell users to run; these tests create a user with exactly them and
run queues and workers through it, then remove one command and expect an error naming it.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from importlib import resources

import pytest
from conveyor import ConnectionFailedError, PermissionDeniedError, Queue, Worker, acl_rules
from conveyor._acl import SCRIPT_COMMANDS

from bench.servers import RunningServer


def _user(server: RunningServer, rules: str) -> str:
    """Create a user with `rules`; return a URL logging in as it."""
    if server.family == "dragonfly":
        pytest.skip("dragonfly: ACL rules are checked on Redis and Valkey")
    name, password = f"cv-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with server.client() as admin:
        admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", *rules.split())
    return f"redis://{name}:{password}@{server.host}:{server.port}/0"


def _without(rules: str, command: str) -> str:
    return " ".join(r for r in rules.split() if r != f"+{command}")


def test_every_command_the_scripts_call_is_in_the_rules() -> None:
    lua = resources.files("conveyor").joinpath("_lua")
    called = {
        name.lower()
        for path in lua.iterdir()
        if path.name.endswith(".lua")
        for name in re.findall(r"redis\.p?call\(\s*['\"]([A-Za-z]+)", path.read_text())
    }
    assert called <= set(SCRIPT_COMMANDS), f"missing from the ACL rules: {called - set(SCRIPT_COMMANDS)}"


def test_queue_and_worker_run_under_the_documented_rules(server: RunningServer, queue_name: str) -> None:
    queue = Queue.from_url(_user(server, acl_rules()), queue_name)
    queue.enqueue_many([("t", i) for i in range(20)])
    queue.enqueue("t", 99, delay=0.05)
    seen: list[int] = []
    worker = Worker(queue, {"t": lambda job: seen.append(job.payload)}, burst=True,
                    install_signal_handlers=False)  # fmt: skip
    time.sleep(0.1)
    assert worker.run()["processed"] == 21
    assert sorted(seen) == [*range(20), 99]
    assert queue.counts()["total_completed"] == 21
    assert queue.get_job("nope") is None
    queue.close()


def test_results_are_stored_and_waited_for_under_the_rules(server: RunningServer,
                                                          queue_name: str) -> None:
    queue = Queue.from_url(_user(server, acl_rules()), queue_name, store_results=True)
    job = queue.enqueue("t", 1)
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(job.result(10)))  # XREAD before the ack
    waiter.start()
    Worker(queue, {"t": lambda job: job.payload + 1}, burst=True, install_signal_handlers=False).run()
    waiter.join(10)
    assert got == [2]
    queue.close()


def test_an_idle_worker_stops_promptly_under_the_rules(server: RunningServer, queue_name: str) -> None:
    """CLIENT UNBLOCK is in the rules so that stop() ends the idle BZPOPMIN at once."""
    queue = Queue.from_url(_user(server, acl_rules()), queue_name)
    worker = Worker(queue, {"t": lambda job: None}, block_timeout=30, install_signal_handlers=False)
    thread = threading.Thread(target=worker.run)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    worker.stop()
    thread.join(20)
    assert time.monotonic() - started < 10
    queue.close()


def test_rules_for_one_queue_refuse_other_queues(server: RunningServer, queue_name: str) -> None:
    url = _user(server, acl_rules(queue=queue_name))
    Queue.from_url(url, queue_name).enqueue("t", 1)
    with pytest.raises(PermissionDeniedError, match=r"NOPERM.*access to a key"):
        Queue.from_url(url, queue_name + "-other").enqueue("t", 1)


@pytest.mark.parametrize("command", ["evalsha", "lpush"])
def test_a_missing_command_gives_a_noperm_error_naming_it(
    server: RunningServer, queue_name: str, command: str, driver: str
) -> None:
    """`evalsha` is sent by the client, `lpush` by the enqueue script: both are named, with either
    driver (glide reports a refused command as its own PermissionDenied kind, not 'NOPERM ...': it
    came out as a plain ResponseError)."""
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")
    queue = Queue.from_url(_user(server, _without(acl_rules(), command)), queue_name, driver=driver)
    with pytest.raises(PermissionDeniedError, match=rf"NOPERM.*the command '{command.upper()}'"):
        queue.enqueue("t", 1)
    queue.close()


def test_a_key_outside_the_rules_is_a_noperm_error_with_either_driver(
    server: RunningServer, queue_name: str, driver: str
) -> None:
    """A read the client sends itself (get_job's HGETALL, counts' pipeline) on a key the user may
    not touch: PermissionDeniedError naming key access, with either driver."""
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")
    url = _user(server, acl_rules(queue=queue_name))
    other = Queue.from_url(url, queue_name + "-other", driver=driver)
    for call in (lambda: other.get_job("1"), other.counts):
        with pytest.raises(PermissionDeniedError, match=r"NOPERM.*access to a key"):
            call()
    other.close()


@pytest.mark.parametrize("login", ["wrong password", "unknown user"])
def test_refused_credentials_are_named_as_such_with_either_driver(
    server: RunningServer, queue_name: str, driver: str, login: str
) -> None:
    """A wrong password read 'cannot reach the server ...: invalid username-password pair': the
    server was reached, and an operator checking the network first looked in the wrong place."""
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")
    url = _user(server, acl_rules())
    user, rest = url.removeprefix("redis://").split(":", 1)
    url = (f"redis://{user}:not-it@{rest.split('@', 1)[1]}" if login == "wrong password"
           else f"redis://nobody-{uuid.uuid4().hex[:6]}:{rest}")
    queue = Queue.from_url(url, queue_name, driver=driver)
    from conveyor._errors import CredentialsRefusedError  # noqa: PLC0415

    with pytest.raises(CredentialsRefusedError) as caught:
        queue.enqueue("t", 1)
    message = str(caught.value)
    assert "refused the credentials" in message and "cannot reach" not in message, message
    assert "not-it" not in message
    queue.close()


def test_a_worker_refused_by_the_server_does_not_say_it_lost_it(caplog: pytest.LogCaptureFixture) -> None:
    from conveyor._errors import CredentialsRefusedError  # noqa: PLC0415
    from conveyor._worker_errors import report_pump_error  # noqa: PLC0415

    with caplog.at_level("WARNING", logger="conveyor.worker"):
        report_pump_error(PermissionDeniedError("NOPERM: the server at h:1/0 refused the command 'LPUSH'"))
        report_pump_error(CredentialsRefusedError("the server at h:1/0 refused the credentials: WRONGPASS"))
        report_pump_error(ConnectionFailedError("cannot reach the server at h:1/0: Connection refused"))
    assert caplog.text.count("worker call refused by the server") == 2, caplog.text
    assert caplog.text.count("worker lost the server") == 1, caplog.text  # the unreachable one
