"""`rediss://` end to end against Debian's redis-server 7.0 (built with TLS), certificates made here.

The CA and server certificate are generated per test session with the openssl CLI (argument lists,
never a shell string); the server listens for TLS on its own port beside the launcher's plain port.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conveyor import AsyncQueue, AsyncWorker, ConnectionFailedError, Job, Queue, Worker

from bench.servers import ServerUnavailable
from bench.tls import TlsServer, make_certificates, start_tls_server


@pytest.fixture(scope="module")
def tls() -> Iterator[TlsServer]:
    try:
        with start_tls_server() as running:
            yield running
    except ServerUnavailable as exc:
        pytest.skip(exc.reason)


def test_queue_and_worker_over_tls(tls: TlsServer, driver: str) -> None:
    """With each driver of --drivers (glide reads the CA from the URL's ssl_ca_certs)."""
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")
    queue = Queue.from_url(tls.url(), f"tls-sync-{driver}", driver=driver)
    queue.enqueue_many([("t", i) for i in range(20)])
    seen: list[int] = []
    worker = Worker(queue, {"t": lambda job: seen.append(job.payload)}, burst=True,
                    install_signal_handlers=False)  # fmt: skip
    assert worker.run()["processed"] == 20
    assert sorted(seen) == list(range(20))
    queue.close()


async def test_async_queue_and_worker_over_tls(tls: TlsServer) -> None:
    queue = AsyncQueue.from_url(tls.url(), "tls-async")
    await queue.enqueue_many([("t", i) for i in range(20)])
    seen: list[int] = []

    async def handle(job: Job) -> None:
        seen.append(job.payload)

    worker = AsyncWorker(queue, {"t": handle}, burst=True, install_signal_handlers=False)
    assert (await asyncio.wait_for(worker.run(), 60))["processed"] == 20
    await queue.aclose()


def test_an_untrusted_certificate_is_a_connection_error(tls: TlsServer, driver: str, tmp_path: Path) -> None:
    """At once with either driver: glide retried the failed handshake until connect_timeout and
    reported 'timed out' (before its connect retries were cut to one)."""
    if driver == "glide":
        pytest.importorskip("glide_sync", reason="valkey-glide-sync is not installed")
    other_ca = make_certificates(tmp_path)["ca"]
    queue = Queue.from_url(tls.url(other_ca), "tls-untrusted", connect_timeout=5, driver=driver)
    started = time.monotonic()
    with pytest.raises(ConnectionFailedError, match=r"certificate verify failed|invalid peer certificate"):
        queue.enqueue("t", 1)
    assert time.monotonic() - started < 2.0
    queue.close()


def test_plain_text_to_the_tls_port_fails_cleanly(tls: TlsServer) -> None:
    server, port = tls.server, tls.tls_port
    queue = Queue.from_url(
        f"redis://{server.host}:{port}/0", "tls-plain", socket_timeout=2, connect_timeout=2
    )
    with pytest.raises(ConnectionFailedError):
        queue.enqueue("t", 1)
