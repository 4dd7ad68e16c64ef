"""Host tasks of a PAI that runs as root: an unprivileged user, in a view where PAI's state is
covered and only the task's own directories (and storages) are there."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pai.cluster.cdispecs import CDI_DIRS_VARIABLE
from pai.executors.base import LogStream
from pai.executors.isolation.mounts import Mount
from pai.executors.isolation.policy import IsolationPolicy

if TYPE_CHECKING:
    from conftest import Harness


@pytest.fixture
def as_nobody(harness: Harness, requirement: Callable[[bool, str], None]) -> Harness:
    requirement(os.geteuid() == 0, "a platform that runs as root drops host tasks to nobody")
    harness.executor = harness.new_executor(isolation=IsolationPolicy("host", task_user="nobody"))
    return harness


def test_a_host_task_runs_as_the_task_user_and_cannot_reach_the_platforms_state(
    as_nobody: Harness, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.key"
    secret.write_text("the platform's signing key\n")
    secret.chmod(0o644)  # even a readable file is out of the task's view
    launch_record = tmp_path / "state" / "tasks" / "curious" / "launch.json"
    script = (
        "id -un\n"
        f"cat {secret} || echo 'key: unreachable'\n"
        f"cat {launch_record} || echo 'state: unreachable'\n"
        'echo written > "$PAI_WORK_DIR/out.txt" && echo "work dir: writable"\n'
        'echo "home=$HOME"\n'
    )

    task = as_nobody.launch(
        "curious", script, env={"PAI_WORK_DIR": str(tmp_path / "work" / "curious")}
    )
    result = as_nobody.wait_finished("curious")

    lines = as_nobody.executor.logs("curious", LogStream.STDOUT).decode().splitlines()
    assert lines == [
        "nobody",
        "key: unreachable",
        "state: unreachable",
        "work dir: writable",
        f"home={task.working_dir}",
    ]
    assert result.exit_code == 0
    nobody = pwd.getpwnam("nobody")
    assert (task.working_dir / "out.txt").stat().st_uid == nobody.pw_uid


def test_storages_are_mounted_for_a_host_task_user(as_nobody: Harness, tmp_path: Path) -> None:
    storage = tmp_path / "shared"
    storage.mkdir()
    (storage / "data.txt").write_text("shared data\n")
    storage.chmod(0o755)
    (storage / "data.txt").chmod(0o644)

    as_nobody.run(
        "reader", "cat /mnt/shared/data.txt\n", mounts=(Mount(str(storage), "/mnt/shared"),)
    )

    assert as_nobody.executor.logs("reader", LogStream.STDOUT) == b"shared data\n"


@pytest.fixture
def device_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A stand-in for an NPU's device node (a file of group `GROUP`, mode 0660) outside the
    platform's state, and a CDI spec in a folder of this test that lists it for device 1."""
    folder = Path(tempfile.mkdtemp(prefix="pai-test-dev-"))
    folder.chmod(0o755)
    node = folder / "npu1"
    node.write_text("npu 1\n")
    os.chown(node, 0, DEVICE_GROUP)
    node.chmod(0o660)
    specs = tmp_path / "cdi"
    specs.mkdir()
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "acc.example/npu",
        "devices": [{"name": "1", "containerEdits": {"deviceNodes": [{"path": str(node)}]}}],
    }
    (specs / "npu.json").write_text(json.dumps(spec))
    monkeypatch.setenv(CDI_DIRS_VARIABLE, str(specs))
    yield node
    shutil.rmtree(folder)


DEVICE_GROUP = 4242
"""A group `nobody` is not in, owning the stand-in device node."""


def test_a_host_task_user_is_given_the_group_of_its_devices_nodes_and_no_other(
    device_node: Path, as_nobody: Harness
) -> None:
    # device_node first: the executor reads where the CDI specs are when it is made.
    script = f"id -G\ncat {device_node} || echo 'node: refused'\n"

    as_nobody.launch("npu", script, gpus=(1,), device_kind="acc.example/npu")
    as_nobody.launch("none", script)
    results = as_nobody.wait_finished("npu"), as_nobody.wait_finished("none")

    assert [result.exit_code for result in results] == [0, 0]
    npu = as_nobody.executor.logs("npu", LogStream.STDOUT).decode().splitlines()
    none = as_nobody.executor.logs("none", LogStream.STDOUT).decode().splitlines()
    nobody_group = str(pwd.getpwnam("nobody").pw_gid)
    assert npu == [f"{nobody_group} {DEVICE_GROUP}", "npu 1"]
    assert none == [nobody_group, "node: refused"]
