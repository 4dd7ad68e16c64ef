"""A 200 MB file goes into a storage and back out with `pai storage cp` while neither the
server (`pai up`, in a process of its own) nor the `pai` command holds it in memory: each
one's resident memory stays within a bound far below the file's size."""

from __future__ import annotations

import hashlib
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from cli.pai_runner import make_pai, pai_command
from e2e.pai_process import ADMIN_PASSWORD, PaiUp
from pai.executors.local import kill_processes_under
from server.harness import LOCAL_CLUSTER_FILE

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
FILE_BYTES = 200 * MIB
SERVER_GROWTH_LIMIT = 64 * MIB
"""What the server may add to its resident memory while moving the file (pieces of 8 MiB)."""
CLIENT_LIMIT = 150 * MIB
"""What the `pai` process may use in all: its interpreter and libraries, plus one piece."""


class PeakMemory:
    """Samples a process's resident memory every few milliseconds until stopped."""

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


@pytest.fixture
def pai_up(tmp_path: Path) -> Iterator[PaiUp]:
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE)
    platform.start()
    yield platform
    platform.stop()
    kill_processes_under(platform.home)


def big_file(path: Path) -> str:
    """A file of FILE_BYTES that does not compress or repeat; returns its SHA-256."""
    digest = hashlib.sha256()
    block = bytearray(hashlib.sha512(b"seed").digest() * (MIB // 64))
    with path.open("wb") as file:
        for index in range(FILE_BYTES // MIB):
            block[:8] = index.to_bytes(8, "big")
            digest.update(block)
            file.write(block)
    return digest.hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def copy_measured(env: dict[str, str], *args: str) -> int:
    """Run `pai storage cp ARGS` and return the peak resident memory of the command."""
    process = subprocess.Popen(
        [*pai_command(), "storage", "cp", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = PeakMemory(process.pid)
    _, stderr = process.communicate(timeout=300)
    peak = sampler.stop()
    assert process.returncode == 0, stderr
    return peak


def test_a_200_mb_file_goes_in_and_out_with_flat_memory(pai_up: PaiUp, tmp_path: Path) -> None:
    storage_root = tmp_path / "storage"
    storage_root.mkdir()
    pai = make_pai(tmp_path / "client")
    login = pai.run(
        "login", "--server", pai_up.url, "--username", "admin", "--password", ADMIN_PASSWORD
    )
    assert login.returncode == 0, login.stderr
    created = pai.run("storage", "create", "big", "--path", str(storage_root))
    assert created.returncode == 0, created.stderr
    source = tmp_path / "source.bin"
    expected = big_file(source)

    assert pai_up.process is not None
    server = psutil.Process(pai_up.process.pid)
    baseline = server.memory_info().rss
    server_peak = PeakMemory(server.pid)
    upload_peak = copy_measured(pai.env, str(source), "big:data/source.bin")
    download_peak = copy_measured(pai.env, "big:data/source.bin", str(tmp_path / "back.bin"))
    server_growth = server_peak.stop() - baseline

    assert sha256(storage_root / "data" / "source.bin") == expected
    assert sha256(tmp_path / "back.bin") == expected
    assert server_growth < SERVER_GROWTH_LIMIT, f"server grew by {server_growth // MIB} MiB"
    assert upload_peak < CLIENT_LIMIT, f"pai used {upload_peak // MIB} MiB uploading"
    assert download_peak < CLIENT_LIMIT, f"pai used {download_peak // MIB} MiB downloading"
