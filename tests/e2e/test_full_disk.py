"""`pai up` with its home on a small disk that fills up, through HTTP and the `pai` command as
people use them: a real file system (a tmpfs of a few MB, mounted by the test) holds the
store, the task logs and the server's log.

A job prints more than the disk holds: its log is cut at PAI's floor and says so, and the node
takes no new task ("out of disk space"), which a waiting job's reason names. Something else
then fills the disk to the last byte: the store cannot write, so a submission is refused with
507 and `Retry-After`, while jobs, their logs and the job list can still be read. Once room is
made, the waiting job runs by itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from e2e.pai_process import PaiUp, job_file, running
from pai.executors.local import kill_processes_under

pytestmark = pytest.mark.slow
DISK_MB = 40
CHATTY_MB = 30  # its stdout and the combined log would take twice this


@pytest.fixture
def small_disk(tmp_path: Path, requirement: Callable[[bool, str], None]) -> Iterator[Path]:
    requirement(os.geteuid() == 0, "mounting a small file system needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount_point)],
        check=True,
    )
    try:
        yield mount_point
    finally:
        kill_processes_under(mount_point)
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


@pytest.fixture
def platform(small_disk: Path) -> Iterator[PaiUp]:
    with running(small_disk / "home") as up:
        yield up


def wait_for(
    condition: Callable[[], object],
    what: str,
    timeout: float = 60,
    seen: Callable[[], object] = lambda: None,
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}; {seen()}"
        time.sleep(0.2)


def test_a_full_disk_leaves_jobs_readable_refuses_writes_clearly_and_recovers(
    platform: PaiUp, small_disk: Path, tmp_path: Path
) -> None:
    pai = platform.admin_cli(tmp_path / "cli")
    said = platform.output.read_text()
    assert "room:    " in said and "kept for PAI's store" in said  # `pai up` says at start

    chatty = f"head -c {CHATTY_MB * 1024 * 1024} /dev/zero | tr '\\\\0' x"
    client = platform.client()
    client.submit(job_file("chatty", [chatty, "echo done"]))
    wait_for(lambda: client.job("chatty").finished, "chatty ends")
    wait_for(lambda: all(node.engine_state == "bad" for node in client.nodes()), "nodes say so")
    nodes = client.nodes()
    client.submit(job_file("waits", ["echo the disk has room again"]))
    wait_for(
        lambda: "out of disk space" in _reason(client, "waits"),
        "waits says why",
        seen=lambda: (client.job("waits").state, _reason(client, "waits")),
    )

    assert client.job("chatty").state == "SUCCEEDED"  # the task itself was not stopped
    assert {node.engine_state for node in nodes} == {"bad"}
    assert all("out of disk space" in node.engine_message for node in nodes)
    log = pai.run("logs", "chatty")
    assert log.returncode == 0, log.stderr
    assert "[pai] this log is cut here: the node is out of disk space" in log.stdout

    filler = small_disk / "filler"
    fill(filler)  # something else takes the last byte: the store cannot write
    refused = httpx.post(
        f"{platform.url}/api/v2/jobs",
        content=job_file("refused", ["echo never"]),
        headers={"Authorization": f"Bearer {client.token}"},
        timeout=30,
    )
    assert refused.status_code == 507, refused.text
    assert refused.json()["code"] == "InsufficientStorageError"
    assert "no room left on its disk" in refused.json()["message"]
    assert int(refused.headers["Retry-After"]) > 0
    assert set(client.virtual_clusters()) == {"default", "research"}
    assert "admin" in {user.username for user in client.users()}
    for command in (["jobs"], ["job", "chatty"], ["logs", "chatty", "--tail", "100"]):
        shown = pai.run(*command)
        assert shown.returncode == 0, f"pai {' '.join(command)}: {shown.stderr}"
    assert "chatty" in pai.run("jobs").stdout

    filler.unlink()  # an administrator makes room: old logs go
    for old_log in (platform.home / "jobs").glob("*~chatty/*/logs/user-*"):
        old_log.unlink()
    wait_for(lambda: client.job("waits").state == "SUCCEEDED", "waits runs once there is room")
    assert client.logs("waits").strip().endswith("the disk has room again")
    client.close()


def _reason(client: object, name: str) -> str:
    status = client.job(name).job_status  # type: ignore[attr-defined]
    return status.wait_reason.message if status.wait_reason else ""


def fill(path: Path) -> None:
    """Write into `path` until the file system has no byte left."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1024 * 1024, 4096, 1):
            with contextlib.suppress(OSError):  # full, for writes of this size
                while True:
                    os.write(descriptor, b"\0" * size)
    finally:
        os.close(descriptor)
    assert shutil.disk_usage(path.parent).free < 4096
