"""A TCP proxy a test can cut: connections to its listening ports are forwarded to one upstream.

The proxy runs its own asyncio loop in a daemon thread, so sync tests and worker subprocesses can
use it alike. It can listen on several ports (one per client process, say), so a test can cut every
connection at once (`cut()`: a network blip, a load balancer restart) or isolate one port
(`block(port)`: its connections are aborted and new ones refused until `unblock(port)`).
When the upstream refuses (a server restarting), the client's connection is closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"
CHUNK = 64 * 1024


class TcpProxy:
    """Forward 127.0.0.1:<listener port> to ``upstream_host:upstream_port`` until closed."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="tcp-proxy")
        self._servers: dict[int, asyncio.Server] = {}
        self._transports: dict[int, set[asyncio.BaseTransport]] = defaultdict(set)
        self._blocked: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def listen(self) -> int:
        """Open one more listening port (forwarding to the same upstream) and return it."""
        return int(self._call(self._listen()))

    def url(self, port: int, db: int = 0) -> str:
        return f"redis://{HOST}:{port}/{db}"

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
    def cut(self, port: int | None = None) -> int:
        """Abort every proxied connection (of one port, or all); returns how many sockets were cut."""
        return int(self._call(self._abort(port)))

    def block(self, port: int) -> int:
        """Cut the port's connections and refuse new ones until `unblock`."""
        self._blocked.add(port)
        return self.cut(port)

    def unblock(self, port: int) -> None:
        self._blocked.discard(port)

    # -- internals ---------------------------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _listen(self) -> int:
        holder: list[int] = []
        server = await asyncio.start_server(lambda r, w: self._accept(holder[0], r, w), HOST, 0)
        port = int(server.sockets[0].getsockname()[1])
        holder.append(port)
        self._servers[port] = server
        return port

    async def _abort(self, port: int | None) -> int:
        ports = list(self._transports) if port is None else [port]
        n = 0
        for p in ports:
            transports, self._transports[p] = self._transports[p], set()
            for transport in transports:
                transport.abort()
            n += len(transports)
        return n

    async def _shutdown(self) -> None:
        for server in self._servers.values():
            server.close()
        await self._abort(None)

    async def _accept(
        self, port: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        if port in self._blocked:
            client_w.transport.abort()
            return
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        pair = (client_w.transport, up_w.transport)
        self._transports[port].update(pair)
        try:
            await asyncio.gather(self._pipe(client_r, up_w), self._pipe(up_r, client_w))
        finally:
            for transport in pair:
                self._transports[port].discard(transport)
                transport.abort()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy until EOF or error, then close the other side so the peer sees the end too."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, RuntimeError):
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
