"""How the job page offers a way into each running task: the `pai ssh` and `ssh` commands of an
ssh-enabled job, and links through the proxy to the ports a task serves the web on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pai.protocol import JobSpec, runtime_plugins_for_role
from pai.server.jobschemas import JobDetail

WEB_PORT_LABELS = ("http", "tensorboard", "jupyter")
"""Port labels whose ports get a link: `http` (every task has one) and the usual services'."""


@dataclass(frozen=True)
class WebPort:
    label: str
    port: int
    url: str


@dataclass(frozen=True)
class TaskDoor:
    """The ways into one running task."""

    task: str
    pai_ssh: str | None
    ssh: str | None
    web: tuple[WebPort, ...]


def task_doors(spec: Mapping[str, Any], detail: JobDetail, owner: str) -> list[TaskDoor]:
    """A door per running task of the attempt shown."""
    framework_name = detail.frameworkName
    job = JobSpec.model_validate(spec)
    doors = []
    for role, info in detail.taskRoles.items():
        ssh_enabled = any(p.plugin == "ssh" for p in runtime_plugins_for_role(job, role))
        for task in info.taskStatuses:
            ports = _ports(task.containerPorts or {})
            if task.taskState != "RUNNING" or not task.containerIp:
                continue
            index = task.taskIndex
            base = f"/jobs/{quote(framework_name, safe='~')}/proxy/{quote(role)}/{index}"
            web = tuple(
                WebPort(label, port, f"{base}/{port}/")
                for label in WEB_PORT_LABELS
                for port in ports.get(label, [])
            )
            ssh_port = ports.get("ssh", [None])[0]
            doors.append(
                TaskDoor(
                    task=f"{role} #{index}",
                    pai_ssh=f"pai ssh {framework_name} {role} {index}" if ssh_enabled else None,
                    ssh=f"ssh -p {ssh_port} {owner}@{task.containerIp}"
                    if ssh_enabled and ssh_port
                    else None,
                    web=web,
                )
            )
    return doors


def _ports(container_ports: Mapping[str, str]) -> dict[str, list[int]]:
    return {
        label: [int(port) for port in value.split(",") if port.strip().isdigit()]
        for label, value in container_ports.items()
    }
