"""A TCP proxy a test can cut: every client connection is forwarded to one upstream address.

The proxy runs its own asyncio loop in a daemon thread, so sync tests and worker subprocesses can
use it alike. `cut()` aborts every open connection on both sides at once (what a network blip or
a load balancer restart looks like to a client); new connections are accepted again right away.
When the upstream refuses (a server restarting), the client's connection is closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType

HOST = "127.0.0.1"
CHUNK = 64 * 1024


class TcpProxy:
    """Forward 127.0.0.1:<port> to ``upstream_host:upstream_port`` until closed."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.cuts = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="tcp-proxy")
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()

    def url(self, db: int = 0) -> str:
        return f"redis://{HOST}:{self.port}/{db}"

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, HOST, 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # -- faults ------------------------------------------------------------------------------------
    def cut(self) -> int:
        """Abort every proxied connection (both sides); returns how many sockets were cut."""
        self.cuts += 1
        return int(self._call(self._abort_all()))

    @property
    def open_connections(self) -> int:
        return len(self._transports) // 2

    # -- internals ---------------------------------------------------------------------------------
    def _call(self, coro: object) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _abort_all(self) -> int:
        transports = list(self._transports)
        for transport in transports:
            transport.abort()
        self._transports.clear()
        return len(transports)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._abort_all()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w.transport, up_w.transport)
        self._transports.update(pair)
        try:
            await asyncio.gather(self._pipe(client_r, up_w), self._pipe(up_r, client_w))
        finally:
            for transport in pair:
                self._transports.discard(transport)
                transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy until EOF or error, then close the other side so the peer sees the end too."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, RuntimeError):
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
