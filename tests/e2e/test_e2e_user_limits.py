"""Limits per user with `pai up` in a process of its own, driven by `pai` as people run it: a
job past its user's GPU limit waits saying why and starts when the user's other job ends; a
group's limit set by an administrator survives the control plane being killed and started
again, and the restarted controller enforces it.

The cluster file declares one node with 8 GPUs, the `default` VC limiting each user to 6. This
machine has no GPU: tasks are given GPU indices, which is all the limit is about. The `hived`
policy keeps a job past its limit waiting (under `pai` it would run on idle GPUs as an
opportunistic job, which tests/orchestrator/test_fairness.py checks).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli.pai_runner import Pai, make_pai
from e2e.pai_process import ADMIN_PASSWORD, PaiUp
from pai.executors.local import kill_processes_under

pytestmark = pytest.mark.slow

CLUSTER = """\
physicalCluster:
  skuTypes:
    GPU: {gpu: 1, cpu: 1, memory: 1Gi}
  cellTypes:
    GPU-NODE: {childCellType: GPU, childCellNumber: 8, isNodeLevel: true}
  physicalCells:
  - {cellType: GPU-NODE, cellAddress: gpu-node, nodeAddress: 127.0.0.1}
virtualClusters:
  default:
    virtualCells: [{cellType: GPU-NODE, cellNumber: 1}]
    userLimit: {gpus: 6}
"""


def gpu_job(name: str, gpus: int) -> str:
    return (
        f"protocolVersion: 2\nname: {name}\ntype: job\n"
        "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\n"
        "taskRoles:\n  main:\n    dockerImage: image\n"
        f"    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: {gpus}}}\n"
        "    commands:\n      - sleep 300\n"
    )


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[PaiUp]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    up = PaiUp(tmp_path / "home", cluster, {"PAI_SCHEDULER": "hived"})
    up.start()
    try:
        yield up
    finally:
        up.stop()
        kill_processes_under(up.home)


def signed_in(platform: PaiUp, directory: Path, username: str, password: str) -> Pai:
    pai = make_pai(directory)
    result = pai.run(
        "login", "--server", platform.url, "--username", username, "--password", password
    )
    assert result.returncode == 0, result.stderr
    return pai


def alice(platform: PaiUp, directory: Path) -> Pai:
    admin = signed_in(platform, directory / "admin", "admin", ADMIN_PASSWORD)
    created = admin.run("user", "create", "alice", "--password", "alice-password-1")
    assert created.returncode == 0, created.stderr
    return signed_in(platform, directory / "alice", "alice", "alice-password-1")


def submit(pai: Pai, directory: Path, name: str, gpus: int) -> None:
    path = directory / f"{name}.yaml"
    path.write_text(gpu_job(name, gpus))
    result = pai.run("submit", str(path))
    assert result.returncode == 0, result.stderr


def state(pai: Pai, name: str) -> str:
    shown = pai.run("job", name, "--json")
    assert shown.returncode == 0, shown.stderr
    status: str = json.loads(shown.stdout)["jobStatus"]["state"]
    return status


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.2)


def test_a_job_past_the_users_gpu_limit_waits_and_starts_when_her_other_job_ends(
    platform: PaiUp, tmp_path: Path
) -> None:
    pai = alice(platform, tmp_path)
    submit(pai, tmp_path, "big", 6)
    until(lambda: state(pai, "alice~big") == "RUNNING", "big running")
    submit(pai, tmp_path, "small", 2)

    reason = "alice uses 6 of the 6 GPUs a user may have in VC 'default'; this job needs 2 GPUs."
    until(lambda: reason in pai.run("job", "alice~small").stdout, "small told why it waits")
    assert state(pai, "alice~small") == "WAITING"
    shown = pai.run("vc", "default").stdout
    (row,) = [line for line in shown.splitlines() if line.startswith("alice")]
    assert "6/6" in row  # GPUs against the limit
    assert "Limit per user: 6 GPUs (the VC's default)." in shown

    assert pai.run("stop", "alice~big").returncode == 0
    until(lambda: state(pai, "alice~small") == "RUNNING", "small running after big ended")


def test_a_groups_limit_survives_a_restart_and_the_restarted_controller_enforces_it(
    platform: PaiUp, tmp_path: Path
) -> None:
    pai = alice(platform, tmp_path)
    admin = signed_in(platform, tmp_path / "admin", "admin", ADMIN_PASSWORD)
    for command in (
        ("group", "create", "power", "--vc", "default"),
        ("user", "add-group", "alice", "power"),
        ("group", "limit", "power", "default", "--gpus", "8"),
    ):
        result = admin.run(*command)
        assert result.returncode == 0, result.stderr

    platform.kill()
    platform.start()

    limits = json.loads(admin.run("vc", "default", "--json").stdout)["userLimits"]
    assert [(group["group"], group["gpus"]) for group in limits["groups"]] == [("power", 8)]
    submit(pai, tmp_path, "big", 6)
    submit(pai, tmp_path, "small", 2)
    until(
        lambda: {state(pai, "alice~big"), state(pai, "alice~small")} == {"RUNNING"},
        "both jobs running under the group's limit of 8 GPUs",
    )
    (row,) = [
        line for line in pai.run("vc", "default").stdout.splitlines() if line.startswith("alice")
    ]
    assert "8/8" in row and "power" in row
