"""What a task is told about its devices: `PAI_*` names for any kind, each known vendor's own
variables, and nothing vendor-specific for a kind PAI has no code for."""

from __future__ import annotations

import pytest

from pai.runtime.env import JobIdentity, RoleInfo, TaskPlacement, build_task_env

JOB = JobIdentity(user="alice", job_name="train", virtual_cluster="mixed", job_attempt=0)
PORTS = {"ssh": [1], "http": [2]}


def env_of(kind: str, devices: list[int], *, gpu_milli: int | None = None) -> dict[str, str]:
    roles = [RoleInfo("main", instances=1, cpu=1, memory_mb=1024, gpu=len(devices) or 0.5)]
    placement = TaskPlacement(
        "n1", "127.0.0.1", devices, PORTS, gpu_milli=gpu_milli, device_kind=kind
    )
    return build_task_env(JOB, roles, "main", 0, {("main", 0): placement}, working_dir="/w")


def test_a_kind_pai_has_no_code_for_is_named_by_pai_variables_alone() -> None:
    env = env_of("acc.example/npu", [1, 3])

    assert env["PAI_DEVICE_KIND"] == "acc.example/npu"
    assert env["PAI_DEVICES"] == "acc.example/npu=1,acc.example/npu=3"
    assert env["PAI_DEVICE_INDICES"] == "1,3"
    assert env["PAI_DEVICE_COUNT"] == "2"
    # No NVIDIA GPU is this task's, so CUDA must not pick any up.
    assert env["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    vendor = {"ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ASCEND_VISIBLE_DEVICES"}
    assert not vendor & set(env)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("nvidia.com/gpu", {"NVIDIA_VISIBLE_DEVICES": "2,5", "CUDA_VISIBLE_DEVICES": "2,5"}),
        ("amd.com/gpu", {"ROCR_VISIBLE_DEVICES": "2,5", "HIP_VISIBLE_DEVICES": "2,5"}),
        ("intel.com/gpu", {"ZE_AFFINITY_MASK": "2,5"}),
        (
            "huawei.com/npu",
            {"ASCEND_VISIBLE_DEVICES": "2,5", "ASCEND_RT_VISIBLE_DEVICES": "2,5"},
        ),
        ("huawei.com/Ascend910", {"ASCEND_VISIBLE_DEVICES": "2,5"}),
        ("habana.ai/gaudi", {"HABANA_VISIBLE_DEVICES": "2,5"}),
        ("intel.com/gaudi", {"HABANA_VISIBLE_DEVICES": "2,5"}),
    ],
)
def test_a_known_vendors_variables_name_the_nodes_devices(
    kind: str, expected: dict[str, str]
) -> None:
    env = env_of(kind, [2, 5])

    assert expected.items() <= env.items()
    assert env["PAI_DEVICES"] == f"{kind}=2,{kind}=5"
    if kind != "nvidia.com/gpu":
        assert env["NVIDIA_VISIBLE_DEVICES"] == "none"


def test_a_share_of_another_kind_gets_its_fraction_but_no_cuda_mps_limits() -> None:
    env = env_of("amd.com/gpu", [0], gpu_milli=500)

    assert env["PAI_GPU_FRACTION"] == "0.5"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
