"""Helpers of the storage tests: storages defined and granted through the API as an
administrator would, and S3-compatible servers run for a test: moto's standalone server, from
PyPI (the test extra installs `moto[s3]` with Flask, which it runs on)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from server.harness import RunningServer

S3_STARTUP_TIMEOUT = 30.0
S3_KEYS = {"accessKeyId": "pai-test-key", "secretAccessKey": "pai-test-secret-value"}


def unique_storage(prefix: str = "team") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def define_storage(
    server: RunningServer, name: str, kind: str, data: dict[str, Any], **fields: Any
) -> None:
    """Define a storage as the administrator (fails the test unless it is created)."""
    with server.client(server.admin_token()) as client:
        response = client.post(
            "/storages", json={"name": name, "type": kind, "data": data, **fields}
        )
    assert response.status_code == 201, response.text


def new_group(server: RunningServer, storages: list[str], members: list[str]) -> str:
    """A group granting `storages` to `members` (who keep their other groups)."""
    name = f"g_{uuid.uuid4().hex[:10]}"
    with server.client(server.admin_token()) as client:
        response = client.post(
            "/groups",
            json={"groupname": name, "extension": {"acls": {"storageConfigs": storages}}},
        )
        assert response.status_code == 201, response.text
        for member in members:
            response = client.put(f"/users/{member}/group", json={"groupname": name})
            assert response.status_code == 201, response.text
    return name


def grant_to_default_group(server: RunningServer, storages: list[str]) -> None:
    with server.client(server.admin_token()) as client:
        current = client.get("/groups/default").json()["extension"]["acls"]["storageConfigs"]
        response = client.put(
            "/groups",
            json={
                "patch": True,
                "data": {
                    "groupname": "default",
                    "extension": {"acls": {"storageConfigs": [*current, *storages]}},
                },
            },
        )
    assert response.status_code == 201, response.text


@dataclass(frozen=True)
class S3Server:
    """An S3-compatible service on a loopback port, and a bucket made in it."""

    endpoint: str
    bucket: str

    def data(self, prefix: str = "") -> dict[str, str]:
        """The `data` of an S3 storage in this bucket."""
        return {"endpoint": self.endpoint, "bucket": self.bucket, "prefix": prefix, **S3_KEYS}

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=S3_KEYS["accessKeyId"],
            aws_secret_access_key=S3_KEYS["secretAccessKey"],
            config=Config(s3={"addressing_style": "path"}),
        )


def moto_server_command() -> list[str] | None:
    """moto's standalone S3 server (`pip install 'moto[s3]' flask flask-cors`), if installed."""
    script = Path(sys.executable).parent / "moto_server"
    if script.exists():
        return [str(script)]
    found = shutil.which("moto_server")
    return [found] if found else None


@contextmanager
def s3_server(log: Path) -> Iterator[S3Server]:
    """moto's S3 server in a process of its own on a free loopback port, with a bucket."""
    command = moto_server_command()
    assert command is not None, "moto's S3 server is not installed"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with log.open("w") as output:
        process = subprocess.Popen(
            [*command, "-H", "127.0.0.1", "-p", str(port)], stdout=output, stderr=output
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + S3_STARTUP_TIMEOUT
        while True:
            try:
                httpx.get(endpoint, timeout=1.0)
                break
            except httpx.TransportError:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the S3 server did not start"
                time.sleep(0.1)
        server = S3Server(endpoint, f"pai-{uuid.uuid4().hex[:8]}")
        server.client().create_bucket(Bucket=server.bucket)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
