"""The `PAI_*` environment of a task: who it is, and where every peer of its job runs.

OpenPAI jobs find their peers only through these variables (`PAI_HOST_IP_<role>_<idx>`,
`PAI_PORT_LIST_<role>_<idx>_<label>`, ...), so their names and formats follow OpenPAI exactly,
legacy aliases included. One deliberate difference: OpenPAI spells role names in the runtime's
variables lower-cased with every character outside [a-z0-9] removed, and in the server's
variables as written in the YAML; here every variable uses the role name exactly as written in
the job's YAML, so `PAI_HOST_IP_${PAI_CURRENT_TASK_ROLE_NAME}_0` always resolves.

A task on a share of a GPU sees only that GPU (`CUDA_VISIBLE_DEVICES`), its share
(`PAI_GPU_FRACTION`, and `PAI_GPU_MEMORY_MB` when it asked for an amount), and the per-client
limits of NVIDIA MPS: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (its share of the GPU's compute) and
`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (its GPU memory). A CUDA program applies those two only when it
connects to the MPS control daemon of its node; without MPS they are ignored and the share is a
promise kept by the scheduler alone (docs/deploy.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.protocol import JobSpec
from pai.protocol.taskrole import GPU_MILLI
from pai.runtime.devices import device_env

FC_NAMESPACE = "default"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class JobIdentity:
    """Who submitted the job and which attempt of it this is."""

    user: str
    job_name: str
    virtual_cluster: str
    job_attempt: int = 0

    @property
    def framework_name(self) -> str:
        """OpenPAI's full job name, `<user>~<job>`, which `PAI_JOB_NAME` carries."""
        return f"{self.user}~{self.job_name}"


@dataclass(frozen=True)
class RoleInfo:
    """What the environment needs to know about one task role of the job."""

    name: str
    instances: int
    cpu: int
    memory_mb: int
    gpu: float
    shm_mb: int | None = None
    min_failed_instances: int | None = None
    min_succeeded_instances: int | None = None

    @property
    def effective_min_failed(self) -> int:
        """OpenPAI treats an absent, null or 0 minFailedInstances as 1."""
        return self.min_failed_instances or 1

    @property
    def effective_min_succeeded(self) -> int:
        """OpenPAI treats an absent, null or 0 minSucceededInstances as `instances`."""
        return self.min_succeeded_instances or self.instances


@dataclass(frozen=True)
class TaskPlacement:
    """Where one task runs: its node, the node's address, its GPUs and its ports by label.

    A task sharing its one GPU has `gpu_milli` thousandths of it, and `gpu_memory_mb` of its
    memory when it asked for an amount.
    """

    node: str
    host_ip: str
    gpus: Sequence[int] = ()
    ports: Mapping[str, Sequence[int]] = field(default_factory=dict)
    gpu_milli: int | None = None
    gpu_memory_mb: int | None = None
    device_kind: str = DEFAULT_DEVICE_KIND
    """The CDI kind of `gpus` (the SKU's `device`)."""


def roles_from_spec(spec: JobSpec) -> list[RoleInfo]:
    """The roles of a parsed job, in the order of its YAML."""
    return [
        RoleInfo(
            name=name,
            instances=role.instances,
            cpu=role.resource_per_instance.cpu,
            memory_mb=role.resource_per_instance.memory_mb,
            gpu=role.resource_per_instance.gpu,
            shm_mb=role.extra_container_options.shm_mb,
            min_failed_instances=role.completion.min_failed_instances,
            min_succeeded_instances=role.completion.min_succeeded_instances,
        )
        for name, role in spec.task_roles.items()
    ]


def build_task_env(
    job: JobIdentity,
    roles: Sequence[RoleInfo],
    role: str,
    index: int,
    placements: Mapping[tuple[str, int], TaskPlacement],
    *,
    task_attempt: int = 0,
    working_dir: str,
    previous_working_dir: str | None = None,
) -> dict[str, str]:
    """Every variable task `role`/`index` sees, given where each task of the job is placed.

    `placements` maps (role, index) to a placement; peers not placed yet (possible without gang
    allocation) are left out of the per-task variables. `previous_working_dir` is the working
    directory of the task's previous attempt, from which a retried or preempted task may resume
    (`PAI_PREVIOUS_WORK_DIR`, absent on a first attempt).
    """
    by_name = {info.name: info for info in roles}
    _check_task(by_name, role, index, placements)
    me = placements[(role, index)]
    env = _static_env(job, roles, by_name[role], index)
    env.update(_peer_env(roles, placements))
    env.update(_own_container_env(me, working_dir))
    env.update(device_env(me.device_kind, me.gpus))
    env.update(_gpu_share_env(me))
    env.update(_framework_controller_env(job, role, index, task_attempt))
    if previous_working_dir is not None:
        env["PAI_PREVIOUS_WORK_DIR"] = previous_working_dir
    return env


def _check_task(
    by_name: Mapping[str, RoleInfo],
    role: str,
    index: int,
    placements: Mapping[tuple[str, int], TaskPlacement],
) -> None:
    for name in by_name:
        if not _NAME.match(name):
            raise ValueError(f"task role name {name!r} cannot be part of an environment variable")
    if role not in by_name:
        raise ValueError(f"unknown task role {role!r}; the job has {sorted(by_name)}")
    if not 0 <= index < by_name[role].instances:
        raise ValueError(
            f"{role} has {by_name[role].instances} instances; index {index} is out of range"
        )
    for (peer_role, peer_index), placement in placements.items():
        peer = by_name.get(peer_role)
        if peer is None or not 0 <= peer_index < peer.instances:
            raise ValueError(f"placement given for {peer_role}-{peer_index}, which the job lacks")
        for label in placement.ports:
            if not _NAME.match(label):
                raise ValueError(f"port label {label!r} of {peer_role}-{peer_index} is not a name")
        if not placement.ports.get("http"):
            raise ValueError(f"{peer_role}-{peer_index} has no http port (every task gets one)")
    if (role, index) not in placements:
        raise ValueError(f"{role}-{index} is being launched but has no placement")


def _static_env(
    job: JobIdentity, roles: Sequence[RoleInfo], me: RoleInfo, index: int
) -> dict[str, str]:
    """What OpenPAI's server sets on the pod: known at submission, independent of placement."""
    task_count = str(sum(info.instances for info in roles))
    role_list = ",".join(info.name for info in roles)
    env = {
        "PAI_JOB_NAME": job.framework_name,
        "PAI_FRAMEWORK_NAME": job.framework_name,
        "PAI_USER_NAME": job.user,
        "PAI_USERNAME": job.user,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_VIRTUAL_CLUSTER": job.virtual_cluster,
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLES_NUM": str(len(roles)),
        "PAI_JOB_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": role_list,
        "PAI_JOB_TASK_ROLE_LIST": role_list,
        "PAI_TASKS_NUM": task_count,
        "PAI_JOB_TASK_COUNT": task_count,
        "PAI_CURRENT_TASK_ROLE_NAME": me.name,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index),
        "PAI_TASK_INDEX": str(index),
    }
    for info in roles:
        env[f"PAI_TASK_ROLE_TASK_COUNT_{info.name}"] = str(info.instances)
        env[f"PAI_RESOURCE_{info.name}"] = (
            f"{info.gpu:g},{info.cpu},{info.memory_mb},{info.shm_mb or 0}"
        )
        env[f"PAI_MIN_FAILED_TASK_COUNT_{info.name}"] = str(info.effective_min_failed)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{info.name}"] = str(info.effective_min_succeeded)
    return env


def _peer_env(
    roles: Sequence[RoleInfo], placements: Mapping[tuple[str, int], TaskPlacement]
) -> dict[str, str]:
    """What OpenPAI's runtime generates once all peers are placed: addresses and ports."""
    env: dict[str, str] = {}
    instances: list[str] = []
    for info in roles:
        host_list: list[str] = []
        for index in range(info.instances):
            instances.append(f"{info.name}:{index}")
            placement = placements.get((info.name, index))
            if placement is None:
                continue
            env[f"PAI_HOST_IP_{info.name}_{index}"] = placement.host_ip
            for label, ports in placement.ports.items():
                joined = ",".join(str(port) for port in ports)
                env[f"PAI_PORT_LIST_{info.name}_{index}_{label}"] = joined
                env[f"PAI_{info.name}_{index}_{label}_PORT"] = joined
            host_list.append(f"{placement.host_ip}:{placement.ports['http'][0]}")
        env[f"PAI_TASK_ROLE_{info.name}_HOST_LIST"] = ",".join(host_list)
    env["PAI_TASK_ROLE_INSTANCES"] = ",".join(instances)
    return env


def _own_container_env(me: TaskPlacement, working_dir: str) -> dict[str, str]:
    http = str(me.ports["http"][0])
    env = {
        "PAI_CONTAINER_HOST_IP": me.host_ip,
        "PAI_CURRENT_CONTAINER_IP": me.host_ip,
        "PAI_CONTAINER_HOST_PORT": http,
        "PAI_CURRENT_CONTAINER_PORT": http,
        "PAI_CONTAINER_HOST_PORT_LIST": "".join(
            f"{label}:{','.join(str(port) for port in ports)};" for label, ports in me.ports.items()
        ),
        "PAI_WORK_DIR": working_dir,
    }
    if me.ports.get("ssh"):
        env["PAI_CONTAINER_SSH_PORT"] = str(me.ports["ssh"][0])
    for label, ports in me.ports.items():
        env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = ",".join(str(port) for port in ports)
    return env


def _gpu_share_env(me: TaskPlacement) -> dict[str, str]:
    """A share of one GPU: how much of it, and the matching MPS per-client limits."""
    if me.gpu_milli is None:
        return {}
    mps = me.device_kind == DEFAULT_DEVICE_KIND  # MPS limits mean something to CUDA only
    env = {"PAI_GPU_FRACTION": f"{me.gpu_milli / GPU_MILLI:g}"}
    if mps:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, math.ceil(me.gpu_milli / 10)))
    if me.gpu_memory_mb:
        env["PAI_GPU_MEMORY_MB"] = str(me.gpu_memory_mb)
        if mps:
            # The limit is per device as the task numbers them: it sees its one GPU as device 0.
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={me.gpu_memory_mb}M"
    return env


def _framework_controller_env(
    job: JobIdentity, role: str, index: int, task_attempt: int
) -> dict[str, str]:
    """FrameworkController's basics, for tools that read them."""
    return {
        "FC_FRAMEWORK_NAMESPACE": FC_NAMESPACE,
        "FC_FRAMEWORK_NAME": job.framework_name,
        "FC_TASKROLE_NAME": role,
        "FC_TASK_INDEX": str(index),
        "FC_FRAMEWORK_ATTEMPT_ID": str(job.job_attempt),
        "FC_TASK_ATTEMPT_ID": str(task_attempt),
        "FC_POD_NAME": f"{job.framework_name}-{role}-{index}",
    }
