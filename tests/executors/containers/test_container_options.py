"""What PAI asks of the container runtime, decided without running it: image names as Docker
reads them, registry credentials, pull progress, GPUs and mounts."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from pai.cluster.devices import DEFAULT_DEVICE_KIND as NVIDIA
from pai.executors.isolation.images import RegistryAuth, auth_file, full_name, pulled_every_time
from pai.executors.isolation.mounts import Mount
from pai.executors.isolation.policy import IsolationError, IsolationPolicy
from pai.executors.isolation.runtime import (
    ContainerError,
    bind_option,
    device_arguments,
    may_raise_limits,
    rdma_arguments,
)


@pytest.mark.parametrize(
    ("written", "pulled"),
    [
        ("python:3.11", "docker.io/library/python:3.11"),
        (
            "openpai/standard:python_3.6-pytorch_1.2.0-gpu",
            "docker.io/openpai/standard:python_3.6-pytorch_1.2.0-gpu",
        ),
        ("myregistry.azurecr.io/team/app:2", "myregistry.azurecr.io/team/app:2"),
        ("127.0.0.1:5000/app:1", "127.0.0.1:5000/app:1"),
        ("localhost/app", "localhost/app"),
    ],
)
def test_image_names_are_read_as_docker_reads_them(written: str, pulled: str) -> None:
    assert full_name(written) == pulled


@pytest.mark.parametrize(
    ("image", "every_time"),
    [
        ("ubuntu", True),
        ("ubuntu:latest", True),
        ("ubuntu:22.04", False),
        ("127.0.0.1:5000/app", True),
        ("127.0.0.1:5000/app:3", False),
        ("ubuntu@sha256:" + "a" * 64, False),
    ],
)
def test_only_latest_tags_are_pulled_when_the_node_has_the_image(
    image: str, every_time: bool
) -> None:
    assert pulled_every_time(image) is every_time


def test_credentials_reach_the_runtime_in_a_private_file_that_is_removed_after(
    tmp_path: Path,
) -> None:
    auth = RegistryAuth("alice", "s3cret-pass", registry="https://index.docker.io/v1/")

    with auth_file(tmp_path, "python:3.11", auth) as path:
        assert path is not None
        assert path.stat().st_mode & 0o777 == 0o600
        entry = json.loads(path.read_text())["auths"]["docker.io"]
        assert base64.b64decode(entry["auth"]).decode() == "alice:s3cret-pass"

    assert not path.exists()
    assert "s3cret-pass" not in repr(auth)


def test_credentials_without_a_registry_are_for_the_images_own(tmp_path: Path) -> None:
    auth = RegistryAuth("bob", "pw")

    with auth_file(tmp_path, "127.0.0.1:5000/team/app:1", auth) as path:
        assert path is not None
        assert list(json.loads(path.read_text())["auths"]) == ["127.0.0.1:5000"]


def test_gpus_are_asked_for_by_cdi_name_where_the_node_has_nvidias_cdi_spec(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    devices = "".join(f"  - name: '{index}'\n" for index in range(4))
    (cdi / "nvidia.yaml").write_text(
        f"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n{devices}"
    )

    options, env = device_arguments(NVIDIA, [2, 3], cdi_dirs=[cdi], dev=tmp_path / "dev")

    assert options == ["--device=nvidia.com/gpu=2", "--device=nvidia.com/gpu=3"]
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}  # NVIDIA_VISIBLE_DEVICES keeps node indices


def test_without_cdi_the_gpus_device_nodes_and_the_drivers_are_passed(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()

    options, env = device_arguments(NVIDIA, [1], cdi_dirs=[tmp_path / "none"], dev=dev)

    assert options == [
        f"--device={dev / 'nvidia1'}",
        f"--device={dev / 'nvidiactl'}",
        f"--device={dev / 'nvidia-uvm'}",
    ]
    assert env == {"CUDA_VISIBLE_DEVICES": "0"}  # inside, its one GPU is the first


def test_gpus_declared_but_absent_give_only_the_variables(tmp_path: Path) -> None:
    options, env = device_arguments(NVIDIA, [0, 5], cdi_dirs=[], dev=tmp_path)

    assert options == []
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_a_task_without_gpus_is_given_none() -> None:
    assert device_arguments(NVIDIA, []) == ([], {})


def test_any_kind_with_a_cdi_spec_is_asked_for_by_cdi_name_alone(tmp_path: Path) -> None:
    (tmp_path / "npu.json").write_text(
        json.dumps(
            {
                "cdiVersion": "0.5.0",
                "kind": "acc.example/npu",
                "devices": [
                    {"name": str(i), "containerEdits": {"env": [f"N={i}"]}} for i in (0, 1)
                ],
            }
        )
    )

    options, env = device_arguments("acc.example/npu", [1], cdi_dirs=[tmp_path])

    assert options == ["--device=acc.example/npu=1"]
    assert env == {}  # a kind PAI has no code for gets what its spec says, nothing more


def test_a_known_vendors_library_numbers_the_containers_devices_from_0(tmp_path: Path) -> None:
    (tmp_path / "amd.yaml").write_text(
        "cdiVersion: 0.5.0\nkind: amd.com/gpu\ndevices:\n  - name: '3'\n  - name: '6'\n"
    )

    options, env = device_arguments("amd.com/gpu", [3, 6], cdi_dirs=[tmp_path])

    assert options == ["--device=amd.com/gpu=3", "--device=amd.com/gpu=6"]
    assert env == {"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}


def test_a_device_the_nodes_spec_lacks_is_not_asked_for_by_cdi_name(tmp_path: Path) -> None:
    (tmp_path / "npu.yaml").write_text("kind: acc.example/npu\ndevices:\n  - name: '0'\n")

    assert device_arguments("acc.example/npu", [0, 1], cdi_dirs=[tmp_path]) == ([], {})


def test_mount_options_carry_read_only_and_refuse_what_they_cannot_say() -> None:
    assert bind_option(Mount("/data/team", "/mnt/data", read_only=True)) == (
        "type=bind,source=/data/team,destination=/mnt/data,ro=true"
    )
    with pytest.raises(ContainerError, match="no comma"):
        bind_option(Mount("/data/a,b", "/mnt/data"))


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"mode": "jail"}, "PAI_ISOLATION: must be one of auto, container, host"),
        ({"runtime": "docker"}, "PAI_CONTAINER_RUNTIME: 'docker' is not supported"),
        ({"pids_limit": 10}, "PAI_TASK_PIDS_LIMIT: must be at least 64"),
    ],
)
def test_bad_isolation_settings_are_refused_with_the_setting_named(
    policy: dict[str, object], message: str
) -> None:
    with pytest.raises(IsolationError, match=message):
        IsolationPolicy(**policy)  # type: ignore[arg-type]


def test_rdma_brings_every_infiniband_device_and_unlimited_locked_memory(tmp_path: Path) -> None:
    infiniband = tmp_path / "infiniband"
    infiniband.mkdir()
    for name in ("uverbs1", "rdma_cm", "uverbs0"):
        (infiniband / name).touch()
    memlock = ["--ulimit=memlock=-1:-1"] if may_raise_limits() else []

    assert rdma_arguments(tmp_path) == [
        f"--device={infiniband / 'rdma_cm'}",
        f"--device={infiniband / 'uverbs0'}",
        f"--device={infiniband / 'uverbs1'}",
        *memlock,
    ]
    assert rdma_arguments(tmp_path / "elsewhere") == memlock
