"""The PAI_* environment a task sees: OpenPAI's names and formats, one spelling of role names."""

from __future__ import annotations

import pytest

from pai.runtime.env import JobIdentity, RoleInfo, TaskPlacement, build_task_env

JOB = JobIdentity(user="alice", job_name="ddp_run", virtual_cluster="vision", job_attempt=2)
ROLES = [
    RoleInfo("master", instances=1, cpu=4, memory_mb=8192, gpu=2, shm_mb=1024,
             min_failed_instances=1, min_succeeded_instances=1),
    RoleInfo("Worker", instances=2, cpu=2, memory_mb=4096, gpu=0,
             min_failed_instances=None, min_succeeded_instances=-1),
]  # fmt: skip
PLACEMENTS = {
    ("master", 0): TaskPlacement(
        "node1", "127.0.0.1", [0, 1], {"ssh": [15000], "http": [15001], "dist": [15002, 15003]}
    ),
    ("Worker", 0): TaskPlacement("node2", "127.0.0.2", [], {"ssh": [15010], "http": [15011]}),
    ("Worker", 1): TaskPlacement("node2", "127.0.0.2", [], {"ssh": [15020], "http": [15021]}),
}


def worker_env() -> dict[str, str]:
    return build_task_env(
        JOB, ROLES, "Worker", 1, PLACEMENTS, task_attempt=3, working_dir="/srv/job/task"
    )


def test_job_identity_and_counts() -> None:
    env = worker_env()

    assert env["PAI_JOB_NAME"] == env["PAI_FRAMEWORK_NAME"] == "alice~ddp_run"
    assert env["PAI_USER_NAME"] == env["PAI_USERNAME"] == "alice"
    assert env["PAI_VIRTUAL_CLUSTER"] == "vision"
    assert env["PAI_DEFAULT_FS_URI"] == ""
    for name in ("PAI_TASK_ROLE_COUNT", "PAI_TASK_ROLES_NUM", "PAI_JOB_TASK_ROLE_COUNT"):
        assert env[name] == "2"
    assert env["PAI_TASK_ROLE_LIST"] == env["PAI_JOB_TASK_ROLE_LIST"] == "master,Worker"
    assert env["PAI_TASKS_NUM"] == env["PAI_JOB_TASK_COUNT"] == "3"
    assert env["PAI_TASK_ROLE_TASK_COUNT_master"] == "1"
    assert env["PAI_TASK_ROLE_TASK_COUNT_Worker"] == "2"


def test_this_task_is_named_with_the_yaml_spelling_of_its_role() -> None:
    env = worker_env()

    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "Worker"
    assert env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == env["PAI_TASK_INDEX"] == "1"
    own_http = "PAI_PORT_LIST_{}_{}_http".format(
        env["PAI_CURRENT_TASK_ROLE_NAME"], env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"]
    )
    assert env[own_http] == "15021"


def test_resources_and_completion_policy_with_openpai_defaults() -> None:
    env = worker_env()

    assert env["PAI_RESOURCE_master"] == "2,4,8192,1024"
    assert env["PAI_RESOURCE_Worker"] == "0,2,4096,0"
    assert env["PAI_MIN_FAILED_TASK_COUNT_master"] == "1"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_master"] == "1"
    assert env["PAI_MIN_FAILED_TASK_COUNT_Worker"] == "1"  # null means 1
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_Worker"] == "-1"


def test_every_peer_is_addressable() -> None:
    env = worker_env()

    assert env["PAI_HOST_IP_master_0"] == "127.0.0.1"
    assert env["PAI_HOST_IP_Worker_0"] == env["PAI_HOST_IP_Worker_1"] == "127.0.0.2"
    assert env["PAI_PORT_LIST_master_0_dist"] == env["PAI_master_0_dist_PORT"] == "15002,15003"
    assert env["PAI_PORT_LIST_Worker_0_ssh"] == "15010"
    assert env["PAI_TASK_ROLE_master_HOST_LIST"] == "127.0.0.1:15001"
    assert env["PAI_TASK_ROLE_Worker_HOST_LIST"] == "127.0.0.2:15011,127.0.0.2:15021"
    assert env["PAI_TASK_ROLE_INSTANCES"] == "master:0,Worker:0,Worker:1"


def test_own_container_variables() -> None:
    env = build_task_env(JOB, ROLES, "master", 0, PLACEMENTS, working_dir="/srv/job/task")

    assert env["PAI_CONTAINER_HOST_IP"] == env["PAI_CURRENT_CONTAINER_IP"] == "127.0.0.1"
    assert env["PAI_CONTAINER_HOST_PORT"] == env["PAI_CURRENT_CONTAINER_PORT"] == "15001"
    assert env["PAI_CONTAINER_SSH_PORT"] == "15000"
    assert env["PAI_CONTAINER_HOST_dist_PORT_LIST"] == "15002,15003"
    assert env["PAI_CONTAINER_HOST_PORT_LIST"] == "ssh:15000;http:15001;dist:15002,15003;"
    assert env["PAI_WORK_DIR"] == "/srv/job/task"


def test_gpus_are_isolated() -> None:
    master = build_task_env(JOB, ROLES, "master", 0, PLACEMENTS, working_dir="/w")
    worker = worker_env()

    assert master["CUDA_VISIBLE_DEVICES"] == master["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert worker["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert worker["CUDA_VISIBLE_DEVICES"] == ""


def test_framework_controller_variables() -> None:
    env = worker_env()

    assert env["FC_FRAMEWORK_NAME"] == "alice~ddp_run"
    assert env["FC_TASKROLE_NAME"] == "Worker"
    assert env["FC_TASK_INDEX"] == "1"
    assert env["FC_FRAMEWORK_ATTEMPT_ID"] == "2"
    assert env["FC_TASK_ATTEMPT_ID"] == "3"


def test_unplaced_peers_are_left_out_without_gang_allocation() -> None:
    placements = {key: value for key, value in PLACEMENTS.items() if key != ("Worker", 0)}

    env = build_task_env(JOB, ROLES, "Worker", 1, placements, working_dir="/w")

    assert "PAI_HOST_IP_Worker_0" not in env
    assert env["PAI_TASK_ROLE_Worker_HOST_LIST"] == "127.0.0.2:15021"
    assert env["PAI_TASK_ROLE_INSTANCES"] == "master:0,Worker:0,Worker:1"


@pytest.mark.parametrize(
    ("role", "index", "placements", "message"),
    [
        ("ps", 0, PLACEMENTS, "unknown task role 'ps'"),
        ("Worker", 2, PLACEMENTS, "index 2 is out of range"),
        ("Worker", 0, {("master", 0): PLACEMENTS[("master", 0)]}, "Worker-0 is being launched"),
        (
            "master",
            0,
            {("master", 0): TaskPlacement("node1", "127.0.0.1", [], {"ssh": [15000]})},
            "master-0 has no http port",
        ),
    ],
)
def test_inconsistent_input_is_rejected(
    role: str, index: int, placements: dict[tuple[str, int], TaskPlacement], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build_task_env(JOB, ROLES, role, index, placements, working_dir="/w")


def share_env(placement: TaskPlacement) -> dict[str, str]:
    roles = [RoleInfo("infer", instances=1, cpu=1, memory_mb=1024, gpu=0.25)]
    return build_task_env(JOB, roles, "infer", 0, {("infer", 0): placement}, working_dir="/w")


def test_a_task_sharing_a_gpu_sees_that_gpu_and_is_told_its_share_and_mps_limits() -> None:
    placement = TaskPlacement(
        "node1", "127.0.0.1", [3], {"ssh": [1], "http": [2]}, gpu_milli=250, gpu_memory_mb=4096
    )

    env = share_env(placement)

    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert env["PAI_GPU_FRACTION"] == "0.25"
    assert env["PAI_GPU_MEMORY_MB"] == "4096"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=4096M"  # its one GPU is device 0
    assert env["PAI_RESOURCE_infer"] == "0.25,1,1024,0"


def test_a_share_without_gpu_memory_leaves_the_memory_limit_unset() -> None:
    placement = TaskPlacement("node1", "127.0.0.1", [0], {"ssh": [1], "http": [2]}, gpu_milli=1)

    env = share_env(placement)

    assert env["PAI_GPU_FRACTION"] == "0.001"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "1"  # MPS takes whole percents, at least 1
    assert "PAI_GPU_MEMORY_MB" not in env and "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env


def test_a_task_on_whole_gpus_gets_no_share_variables() -> None:
    env = build_task_env(JOB, ROLES, "master", 0, PLACEMENTS, working_dir="/w")

    assert not {"PAI_GPU_FRACTION", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"} & env.keys()
