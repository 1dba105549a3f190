"""A TCP proxy that can cut every connection and refuse new ones for a while.

Used by the crash table's "connection cut" fault: workers connect through it, the server
keeps running, and ``cut(seconds)`` drops every connection (both sides see a reset/EOF) and
closes the listening socket, so reconnect attempts are refused until it reopens on the same
port.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class CuttableProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``; ``cut(s)`` simulates a network outage."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._stopped = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @staticmethod
    def _listen(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(256)
        return sock

    def _accept_loop(self) -> None:
        while not self._stopped:
            listener = self._listener
            try:
                client, _ = listener.accept()
            except OSError:  # closed by cut(): wait for it to reopen
                time.sleep(0.02)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._socks |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._socks -= {src, dst}

    def cut(self, seconds: float) -> None:
        """Drop every connection and refuse new ones for ``seconds``."""
        self._close_listener()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        time.sleep(seconds)
        deadline = time.monotonic() + 5
        while True:  # the accept thread may take a moment to let go of the old socket
            try:
                self._listener = self._listen(self.port)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _close_listener(self) -> None:
        """shutdown() wakes a thread blocked in accept(); close() alone would not."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def close(self) -> None:
        self._stopped = True
        self._close_listener()
        with self._lock:
            for s in list(self._socks):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
