"""A proxy between a client and a test's server that can hold back what clients send."""

from __future__ import annotations

import socket
import threading
import time


class HoldingProxy:
    """Forwards a local port to a server, each chunk a client sends 0.1 s late (a batch of
    retry/purge takes that long at least); after ``hold()`` what clients send is dropped, so a
    call sent then never runs."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.held = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, upstream, 0.1), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, 0.0), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, delay: float) -> None:
        with source, target:
            try:
                while data := source.recv(65536):
                    time.sleep(delay)
                    if delay and self.held.is_set():
                        continue  # held: never delivered
                    target.sendall(data)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
