"""Moving a large file into and out of a storage: speed, and the memory it costs.

`pai up` runs in a process of its own on the example cluster; a file (default 200 MB) goes
into a directory storage and into an S3 storage (moto's S3 server, from PyPI, on a loopback
port) with `pai storage cp`, then back out. Each transfer reports its rate and the peak
resident memory of the `pai` command and how much the server's grew; neither should depend
on the file's size, since both stream the data in pieces.

    python benchmarks/storage.py              # Rich table
    python benchmarks/storage.py --json       # [{"kind", "direction", "mb_per_s", ...}]
    python benchmarks/storage.py --mb 1000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
from rich.console import Console
from rich.table import Table

from pai.executors.local import kill_processes_under
from pai.sdk import Client

CLUSTER = Path(__file__).parents[1] / "examples" / "clusters" / "local-4node.yaml"
MIB = 1024 * 1024
ADMIN_PASSWORD = "bench-Admin-password-1"
S3_KEYS = {"accessKeyId": "bench-key", "secretAccessKey": "bench-secret"}
BIN = Path(sys.executable).parent


class PeakMemory:
    """The highest resident memory of a process, sampled every 10 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.peak = max(self.peak, self._process.memory_info().rss)
            except psutil.NoSuchProcess:
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def moto_server() -> str | None:
    """moto's standalone S3 server, next to this Python or on the PATH."""
    beside = BIN / "moto_server"
    return str(beside) if beside.exists() else shutil.which("moto_server")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` different free ports (two probes in a row may be given the same one)."""
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def wait_for(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    """Until `process` answers at `url`: an answer from another process that took the port
    first is no start."""
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(url, timeout=1.0)
            if listens(process.pid, httpx.URL(url).port):
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start on {url}") from None
        time.sleep(0.1)


def listens(pid: int, port: int | None) -> bool:
    """Whether the process `pid`, or one of its children, listens on `port`."""
    try:
        parent = psutil.Process(pid)
        family = [parent, *parent.children(recursive=True)]
        return any(
            connection.status == psutil.CONN_LISTEN and connection.laddr.port == port
            for process in family
            for connection in process.net_connections(kind="tcp")
        )
    except psutil.NoSuchProcess:
        return False


@contextmanager
def service(
    command: list[str], url: str, log: Path, env: dict[str, str], what: str
) -> Iterator[int]:
    with log.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for(url, process, what)
        yield process.pid
    finally:
        process.terminate()
        process.wait(30)


def big_file(path: Path, megabytes: int) -> str:
    digest = hashlib.sha256()
    block = bytearray(hashlib.sha512(b"bench").digest() * (MIB // 64))
    with path.open("wb") as file:
        for index in range(megabytes):
            block[:8] = index.to_bytes(8, "big")
            digest.update(block)
            file.write(block)
    return digest.hexdigest()


def copy(env: dict[str, str], server_pid: int, source: str, target: str) -> dict[str, float]:
    server = psutil.Process(server_pid)
    baseline = server.memory_info().rss
    server_peak = PeakMemory(server_pid)
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(BIN / "pai"), "storage", "cp", source, target],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client_peak = PeakMemory(process.pid)
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(stderr.decode())
    return {
        "seconds": round(seconds, 2),
        "client_peak_mib": round(client_peak.stop() / MIB, 1),
        "server_growth_mib": round((server_peak.stop() - baseline) / MIB, 1),
    }


def measure(directory: Path, megabytes: int) -> list[dict[str, Any]]:
    home = directory / "home"
    port, s3_port = free_ports(2)
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PAI_HOME": str(home), "PAI_ADMIN_PASSWORD": ADMIN_PASSWORD}
    env.pop("PAI_DATABASE_URL", None)
    client_env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_")}
    client_env.update(PAI_CONFIG=str(directory / "client" / "config"), HOME=str(directory))
    source = directory / "source.bin"
    digest = big_file(source, megabytes)
    results = []
    with (
        service(
            [str(BIN / "pai"), "up", "--port", str(port), "--cluster", str(CLUSTER)],
            url,
            directory / "pai-up.log",
            env,
            "pai up",
        ) as server_pid,
        service(
            [str(moto_server()), "-H", "127.0.0.1", "-p", str(s3_port)],
            f"http://127.0.0.1:{s3_port}",
            directory / "moto.log",
            dict(os.environ),
            "moto's S3 server",
        ),
    ):
        try:
            subprocess.run(
                [str(BIN / "pai"), "login", "--server", url, "--username", "admin",
                 "--password", ADMIN_PASSWORD],
                env=client_env, check=True, capture_output=True,
            )  # fmt: skip
            _define_storages(url, directory, s3_port)
            for kind in ("directory", "s3"):
                for direction, (from_, to) in (
                    ("upload", (str(source), f"bench-{kind}:source.bin")),
                    ("download", (f"bench-{kind}:source.bin", str(directory / "back.bin"))),
                ):
                    row = copy(client_env, server_pid, from_, to)
                    rate = megabytes / row["seconds"]
                    results.append(
                        {"kind": kind, "direction": direction, "mb": megabytes,
                         "mb_per_s": round(rate, 1), **row}
                    )  # fmt: skip
                _check(directory / "back.bin", digest)
        finally:
            kill_processes_under(home)
    return results


def _define_storages(url: str, directory: Path, s3_port: int) -> None:
    import boto3

    endpoint = f"http://127.0.0.1:{s3_port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_KEYS["accessKeyId"],
        aws_secret_access_key=S3_KEYS["secretAccessKey"],
    ).create_bucket(Bucket="bench")
    (directory / "storage").mkdir()
    with Client.login(url, "admin", ADMIN_PASSWORD) as client:
        client.create_storage("bench-directory", "directory", {"path": str(directory / "storage")})
        client.create_storage(
            "bench-s3", "s3", {"endpoint": endpoint, "bucket": "bench", **S3_KEYS}
        )


def _check(path: Path, digest: str) -> None:
    found = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(MIB):
            found.update(chunk)
    if found.hexdigest() != digest:
        raise RuntimeError("the file came back different")
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--mb", type=int, default=200, help="the file's size in MiB")
    args = parser.parse_args()
    if moto_server() is None:
        raise SystemExit("needs moto's S3 server: pip install 'moto[s3]' flask flask-cors")
    with tempfile.TemporaryDirectory(prefix="pai-storage-bench-") as directory:
        results = measure(Path(directory), args.mb)
    if args.json:
        print(json.dumps(results))
        return
    table = Table(title=f"pai storage cp of a {args.mb} MiB file")
    columns = ("kind", "direction", "seconds", "mb_per_s", "client_peak_mib", "server_growth_mib")
    for column in ("storage", "direction", "seconds", "MiB/s", "pai peak MiB", "server +MiB"):
        table.add_column(column, justify="right")
    for row in results:
        table.add_row(*(str(row[key]) for key in columns))
    Console().print(table)


if __name__ == "__main__":
    main()
