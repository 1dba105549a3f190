"""`rediss://` end to end against Debian's redis-server 7.0 (built with TLS), certificates made here.

The CA and server certificate are generated per test session with the openssl CLI (argument lists,
never a shell string); the server listens for TLS on its own port beside the launcher's plain port.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conveyor import AsyncQueue, AsyncWorker, ConnectionFailedError, Job, Queue, Worker

from bench.servers import RunningServer, ServerUnavailable, _free_port, start_server


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> dict[str, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1, valid one day."""
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "1", "-subj", "/CN=conveyor-test-ca", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=directory)  # fmt: skip
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "san.ext",
             cwd=directory)  # fmt: skip
    return {name: directory / f"{name}.crt" for name in ("ca", "server")} | {"key": directory / "server.key"}


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, int, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to generate certificates")
    certs = make_certificates(tmp_path_factory.mktemp("tls"))
    tls_port = _free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(certs["server"]),
            "--tls-key-file", str(certs["key"]), "--tls-ca-cert-file", str(certs["ca"]),
            "--tls-auth-clients", "no"]  # fmt: skip
    try:
        with start_server("redis-7.0", extra_args=args) as server:
            yield server, tls_port, certs["ca"]
    except ServerUnavailable as exc:
        pytest.skip(exc.reason)


def _url(tls: tuple[RunningServer, int, Path], ca: Path | None = None) -> str:
    server, port, default_ca = tls
    return f"rediss://{server.host}:{port}/0?ssl_ca_certs={ca or default_ca}"


def test_queue_and_worker_over_tls(tls_server: tuple[RunningServer, int, Path]) -> None:
    queue = Queue.from_url(_url(tls_server), "tls-sync")
    queue.enqueue_many([("t", i) for i in range(20)])
    seen: list[int] = []
    worker = Worker(queue, {"t": lambda job: seen.append(job.payload)}, burst=True,
                    install_signal_handlers=False)  # fmt: skip
    assert worker.run()["processed"] == 20
    assert sorted(seen) == list(range(20))
    queue.close()


async def test_async_queue_and_worker_over_tls(tls_server: tuple[RunningServer, int, Path]) -> None:
    queue = AsyncQueue.from_url(_url(tls_server), "tls-async")
    await queue.enqueue_many([("t", i) for i in range(20)])
    seen: list[int] = []

    async def handle(job: Job) -> None:
        seen.append(job.payload)

    worker = AsyncWorker(queue, {"t": handle}, burst=True, install_signal_handlers=False)
    assert (await asyncio.wait_for(worker.run(), 60))["processed"] == 20
    await queue.aclose()


def test_an_untrusted_certificate_is_a_connection_error(
    tls_server: tuple[RunningServer, int, Path], tmp_path: Path
) -> None:
    other_ca = make_certificates(tmp_path)["ca"]
    queue = Queue.from_url(_url(tls_server, other_ca), "tls-untrusted", connect_timeout=5)
    with pytest.raises(ConnectionFailedError, match=r"certificate verify failed"):
        queue.enqueue("t", 1)


def test_plain_text_to_the_tls_port_fails_cleanly(tls_server: tuple[RunningServer, int, Path]) -> None:
    server, port, _ = tls_server
    queue = Queue.from_url(
        f"redis://{server.host}:{port}/0", "tls-plain", socket_timeout=2, connect_timeout=2
    )
    with pytest.raises(ConnectionFailedError):
        queue.enqueue("t", 1)
