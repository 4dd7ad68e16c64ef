"""A client of an https:// server checks its certificate (TLS is set up on the first https://
request, pai.sdk.connections): a server the client's trusted authorities did not sign is
refused, one they did is reached. The server is a real TLS server on 127.0.0.1 with a
certificate made for the test."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pai.sdk import Client, ServerNotTrustedError

INFO = {"name": "pai", "version": "test"}


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key; (certificate, key) files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate_file, key_file = directory / "server.pem", directory / "server.key"
    certificate_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certificate_file, key_file


class InfoHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(INFO).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https:// server answering `GET /api/v2/info`; its URL and certificate file."""
    certificate, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), InfoHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", certificate
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_server_whose_certificate_is_not_trusted_is_refused(
    https_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = https_server
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)

    heard: list[object] = []

    with (
        Client(url, on_retry=lambda error, seconds: heard.append(error)) as client,
        pytest.raises(ServerNotTrustedError) as refused,
    ):
        client.info()

    assert "certificate verify failed" in str(refused.value).lower()
    assert heard == []  # refused at once: trying again would not make it trusted


def test_a_server_with_a_trusted_certificate_is_reached(
    https_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, certificate = https_server
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))

    with Client(url) as client:
        assert client.info().name == "pai"
