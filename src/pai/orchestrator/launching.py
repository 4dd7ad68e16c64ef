"""Turning a placed task into what an executor runs: ports, environment, script, directories."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.executors.base import TaskLaunch
from pai.executors.isolation.images import RegistryAuth
from pai.executors.isolation.policy import CONTAINER
from pai.orchestrator import framework as fw
from pai.orchestrator.active import ActiveJob, share_fields, task_key
from pai.protocol import substitute_secrets
from pai.runtime.env import JobIdentity, TaskPlacement, build_task_env, roles_from_spec
from pai.runtime.interactive import TaskAccess
from pai.runtime.plugins import ssh_server_for_role, task_script_for_role
from pai.runtime.ports import PortAllocator
from pai.scheduler.types import PodPlacement


def assign_ports(
    job: ActiveJob,
    pods: tuple[PodPlacement, ...],
    ports: PortAllocator,
    isolation_on: Callable[[str], str],
    device_kind: str = DEFAULT_DEVICE_KIND,
    rdma_nodes: frozenset[str] = frozenset(),
) -> dict[fw.TaskKey, dict[str, Any]]:
    """Hold ports for each placed pod and describe where and how its task runs (kept with the
    attempt): node, address, devices (of `device_kind`, the SKU's CDI kind), ports, the image
    asked for and what isolates the task on its node (`isolation_on(node)`); on a node of
    `rdma_nodes`, the task of a job of several tasks is given the node's RDMA devices.

    All or nothing: if one task's ports run out, the ports of the others are given back.
    """
    placed: dict[fw.TaskKey, dict[str, Any]] = {}
    several = sum(role.instances for role in job.spec.task_roles.values()) > 1
    try:
        for pod in pods:
            task = (pod.role, pod.index)
            key = task_key(job, task)
            request = job.spec.task_roles[pod.role].resource_per_instance.ports
            # A pass that the store failed (a restart, a full disk) may have placed this very
            # try before: its ports were never recorded, so they are taken back and held anew.
            ports.release(key)
            held = ports.allocate(key, pod.node, pod.address, request)
            placed[task] = {
                "key": key,
                "node": pod.node,
                "address": pod.address,
                "gpus": list(pod.leaf_indices) if _uses_gpus(job, pod.role) else [],
                **({} if device_kind == DEFAULT_DEVICE_KIND else {"deviceKind": device_kind}),
                **({"rdma": True} if several and pod.node in rdma_nodes else {}),
                "leaves": list(pod.leaf_indices),
                **share_fields(pod.share),
                "ports": held,
                "dockerImage": _image_uri(job, pod.role),
                "isolation": isolation_on(pod.node),
            }
    except Exception:
        for where in placed.values():
            ports.release(where["key"])
        raise
    return placed


def build_launch(
    job: ActiveJob,
    task: fw.TaskKey,
    secrets: Mapping[str, Any],
    attempt_dir: Callable[[str, str, str], Path],
    access: TaskAccess | None = None,
) -> TaskLaunch:
    """The launch of the current attempt of `task`, which must have its placement recorded;
    its working and log directories go where `attempt_dir(node, job, key)` says.

    Peers are those tasks of the current job attempt that have a placement (all of them under
    gang allocation). Secrets are substituted into the script here and nowhere else, and so are
    the SSH keys in `access`. The working directory of the task's previous launched attempt, if
    any, is laid out by `attempt_dir` too: a path on the node that attempt ran on.
    """
    machine = job.machine
    where = machine.tasks[task].current.placement
    assert where is not None, f"{task} is launched without a placement"
    peers = {
        key: _task_placement(t.current.placement)
        for key, t in machine.tasks.items()
        if t.current.placement is not None and (t.alive or key == task)
    }
    identity = JobIdentity(
        user=job.username,
        job_name=job.name,
        virtual_cluster=job.spec.virtual_cluster,
        job_attempt=machine.attempt.attempt_id,
    )
    directory = attempt_dir(where["node"], job.framework_name, where["key"])
    working_dir = directory / "work"
    previous = _previous_placement(machine, task)
    previous_working_dir = (
        None
        if previous is None
        else str(attempt_dir(previous["node"], job.framework_name, previous["key"]) / "work")
    )
    role = job.spec.task_roles[task[0]]
    in_container = where.get("isolation") == CONTAINER
    env = build_task_env(
        identity,
        roles_from_spec(job.spec),
        task[0],
        task[1],
        peers,
        task_attempt=machine.tasks[task].current.attempt_id,
        working_dir=str(working_dir),
        previous_working_dir=previous_working_dir,
    )
    spec = job.spec.model_copy(update={"secrets": dict(secrets)})
    resources = role.resource_per_instance
    return TaskLaunch(
        key=where["key"],
        job=job.framework_name,
        role=task[0],
        index=task[1],
        job_attempt=machine.attempt.attempt_id,
        task_attempt=machine.tasks[task].current.attempt_id,
        node=where["node"],
        address=where["address"],
        script=task_script_for_role(spec, task[0], in_container=in_container),
        env=env,
        working_dir=working_dir,
        log_dir=directory / "logs",
        memory_mb=resources.memory_mb,
        gpus=tuple(where["gpus"]),
        device_kind=where.get("deviceKind", DEFAULT_DEVICE_KIND),
        rdma=bool(where.get("rdma")),
        ports={label: tuple(numbers) for label, numbers in where["ports"].items()},
        docker_image=_image_uri(job, task[0]),
        stop_grace_seconds=job.spec.extras.pod_graceful_deletion_timeout_sec,
        cpus=resources.cpu or None,
        shm_mb=role.extra_container_options.shm_mb,
        previous_working_dir=Path(previous_working_dir) if previous_working_dir else None,
        isolation=where.get("isolation"),
        image_auth=_image_auth(job, task[0], secrets) if in_container else None,
        ssh_server=ssh_server_for_role(spec, task[0], access),
    )


def _previous_placement(machine: fw.Job, task: fw.TaskKey) -> Mapping[str, Any] | None:
    """Where the task's latest earlier attempt that was launched ran: an earlier try of the task
    in this job attempt (a task retry), else its last launched try in an earlier job attempt."""
    earlier = [attempt.tasks.get(task) for attempt in machine.history]
    tries = [
        attempt
        for earlier_task in (*earlier, machine.tasks[task])
        if earlier_task is not None
        for attempt in earlier_task.attempts
    ][:-1]  # the last is the attempt being launched
    for attempt in reversed(tries):
        if attempt.placement is not None and attempt.launched_at is not None:
            return attempt.placement
    return None


def _task_placement(where: Mapping[str, Any] | None) -> TaskPlacement:
    assert where is not None
    return TaskPlacement(
        node=where["node"],
        host_ip=where["address"],
        gpus=tuple(where["gpus"]),
        ports={label: tuple(numbers) for label, numbers in where["ports"].items()},
        gpu_milli=where.get("gpuMilli"),
        gpu_memory_mb=where.get("gpuMemoryMB"),
        device_kind=where.get("deviceKind", DEFAULT_DEVICE_KIND),
    )


def _uses_gpus(job: ActiveJob, role: str) -> bool:
    """Leaf cells are GPUs only for roles that ask for GPUs (on CPU SKUs they are CPU slots)."""
    return job.spec.task_roles[role].resource_per_instance.gpu > 0


def _image_auth(job: ActiveJob, role: str, secrets: Mapping[str, Any]) -> RegistryAuth | None:
    """The credentials of the role's image, its secret references resolved."""
    image = job.spec.prerequisite("dockerimage", job.spec.task_roles[role].docker_image)
    auth = getattr(image, "auth", None)
    if auth is None or not (auth.username or auth.password):
        return None
    return RegistryAuth(
        username=substitute_secrets(auth.username or "", secrets),
        password=substitute_secrets(auth.password or "", secrets),
        registry=auth.registryuri or "",
    )


def _image_uri(job: ActiveJob, role: str) -> str | None:
    image = job.spec.prerequisite("dockerimage", job.spec.task_roles[role].docker_image)
    uri = getattr(image, "uri", None)
    return str(uri) if uri else None
