"""What a local run of a job file runs, where, and how that differs from the cluster.

Each task gets a loopback address of its own (127.0.0.1, 127.0.0.2, ... in role and index order,
as `pai up` numbers the nodes of a cluster file), so peers reach each other by the addresses
their `PAI_*` variables give, as on a cluster. GPUs are given out whole, in task order, while the
machine has them; a task that asks for more than are left runs without GPUs, and says so.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pai.executors.isolation.images import full_name, present_digest
from pai.executors.isolation.policy import CONTAINER, HOST, NodeIsolation
from pai.orchestrator.framework import TaskKey
from pai.protocol import JobSpec, parse_job, runtime_plugins_for_role, secret_names
from pai.scheduler.types import PodPlacement
from pai.sdk.submission import job_request

FIRST_ADDRESS = ipaddress.IPv4Address("127.0.0.1")


class RunPlanError(ValueError):
    """The run cannot start as asked (an unknown role, an index out of range)."""


@dataclass(frozen=True)
class RunPlan:
    """The job with its parameters applied, its secrets, and the tasks to run with where each
    runs. `only_task` is set when one task was chosen (`--role/--index`)."""

    spec: JobSpec
    secrets: Mapping[str, Any]
    pods: Mapping[TaskKey, PodPlacement]
    only_task: TaskKey | None = None

    @property
    def tasks(self) -> tuple[TaskKey, ...]:
        return tuple(self.pods)


def load_job(
    text: str, parameters: Mapping[str, str], secrets: Mapping[str, Any]
) -> tuple[JobSpec, dict[str, Any]]:
    """The job of `text` with `parameters` overriding those it declares (as `pai submit -p`
    does), and its secrets: those of the file, overridden by `secrets`. Raises ProtocolError
    for an invalid job (its problems placed in `text`, checked before any edit) and
    InvalidArgumentError for an undeclared parameter."""
    spec = parse_job(text)
    if parameters:
        spec = parse_job(job_request(text, parameters).content)
    return spec, {**spec.secrets, **secrets}


def missing_secrets(text: str, secrets: Mapping[str, Any]) -> list[str]:
    """A note for each secret the job refers to but nobody gave: it is empty, as on a cluster."""
    return [
        f"secret {name} is not given (--secret {name}=VALUE or --secrets-file): it is empty here"
        for name in sorted(secret_names(text) - set(secrets))
    ]


def choose_task(spec: JobSpec, role: str | None, index: int | None) -> TaskKey | None:
    """The one task `--role/--index` name (index 0 when only the role is given), or None."""
    if role is None:
        if index is not None:
            raise RunPlanError("--index needs --role: which role's task should run?")
        return None
    roles = spec.task_roles
    if role not in roles:
        raise RunPlanError(f"--role {role!r}: the job has no such role (it has {', '.join(roles)})")
    chosen = index or 0
    instances = roles[role].instances
    if not 0 <= chosen < instances:
        raise RunPlanError(
            f"--index {chosen}: role {role!r} has {instances} instance"
            f"{'s' if instances != 1 else ''} (indexes 0 to {instances - 1})"
        )
    return (role, chosen)


def plan_run(
    spec: JobSpec, secrets: Mapping[str, Any], only_task: TaskKey | None, gpu_count: int
) -> tuple[RunPlan, list[str]]:
    """Where each task runs, and what about the GPUs cannot be as on the cluster."""
    every = [
        (name, index) for name, role in spec.task_roles.items() for index in range(role.instances)
    ]
    free = list(range(gpu_count))
    notes: list[str] = []
    pods: dict[TaskKey, PodPlacement] = {}
    for number, task in enumerate(every):
        if only_task is not None and task != only_task:
            continue
        wanted = math.ceil(spec.task_roles[task[0]].resource_per_instance.gpu)
        gpus: tuple[int, ...] = ()
        if wanted and len(free) >= wanted:
            gpus, free = tuple(free[:wanted]), free[wanted:]
        elif wanted:
            notes.append(
                f"{label(task)} asks for {wanted} GPU{'s' if wanted != 1 else ''}, but this "
                f"machine has {len(free)} left of {gpu_count}: it runs without GPUs"
            )
        address = str(FIRST_ADDRESS + number)
        pods[task] = PodPlacement(task[0], task[1], f"local-{number}", address, gpus, None)
    return RunPlan(spec, secrets, pods, only_task), notes


def differences(
    plan: RunPlan, isolation: NodeIsolation, chosen: str, runtime_env: Mapping[str, str]
) -> list[str]:
    """What cannot be as on the cluster, besides GPUs, and what the run does instead;
    `chosen` is the isolation asked for (`PAI_ISOLATION`)."""
    spec = plan.spec
    notes = [_where_tasks_run(isolation, chosen)]
    roles = sorted({role for role, _ in plan.tasks}, key=list(spec.task_roles).index)
    runtime = isolation.runtime
    for image in sorted({image for role in roles if (image := _image(spec, role))}):
        if isolation.mode != CONTAINER:
            notes.append(f"image {image} is not used: its tasks run on this machine's own tools")
        elif runtime and present_digest(runtime, full_name(image), runtime_env) is None:
            notes.append(f"image {image} is not on this machine: it is pulled first")
    for storage in spec.extras.storages or ():
        path = storage.mount_path or f"/mnt/{storage.name}"
        notes.append(f"storage {storage.name} is not mounted here: tasks find nothing at {path}")
    if spec.extras.storages == []:
        notes.append("the user's default storages are not mounted here")
    for role in roles:
        plugins = {config.plugin for config in runtime_plugins_for_role(spec, role)}
        if "ssh" in plugins:
            notes.append(f"role {role}: no SSH server (it needs the cluster's keys); use --shell")
    if plan.only_task is not None:
        notes.append(
            f"only {label(plan.only_task)} runs: its peers' addresses and ports are not set"
        )
    return notes


def _where_tasks_run(isolation: NodeIsolation, chosen: str) -> str:
    if isolation.mode == CONTAINER:
        return isolation.describe()
    why = "PAI_ISOLATION=host" if chosen == HOST else "podman is not installed"
    who = f" as user {isolation.task_user.name}" if isolation.task_user else ""
    return f"tasks run directly on this machine{who}, not in containers of their images ({why})"


def label(task: TaskKey) -> str:
    """`srv/0`, as output lines are prefixed."""
    return f"{task[0]}/{task[1]}"


def _image(spec: JobSpec, role: str) -> str | None:
    image = spec.prerequisite("dockerimage", spec.task_roles[role].docker_image)
    uri = getattr(image, "uri", None)
    return str(uri) if uri else None
