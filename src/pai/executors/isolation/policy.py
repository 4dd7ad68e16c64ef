"""What separates a task from its node, as one node decides it.

An administrator sets a policy for every node (`IsolationPolicy`, from `PAI_ISOLATION`,
`PAI_CONTAINER_RUNTIME`, `PAI_TASK_USER`, `PAI_TASK_PIDS_LIMIT`); each node resolves it against
what it has (`resolve`):

- `container`: every task runs in an OCI container of its job's image, through the node's
  container runtime (podman), with only its own directories and storages mounted.
- `host`: every task runs as a process on the node. When PAI runs as root, tasks run as an
  unprivileged user (`nobody` unless set otherwise) in a mount namespace of their own, in
  which PAI's home (and any folder above it that user could not pass) is covered by an empty
  file system, with only the task's own directories bound back in place.

`auto` (the default) takes containers where a runtime is found and the host elsewhere;
`container` makes a node without a runtime refuse tasks, and say why. A runtime that is found
but cannot start a container (`runtimecheck`) keeps the node in container mode, taking no
tasks until it can.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pai.cluster.cdispecs import CDI_DIRS_VARIABLE
from pai.executors.isolation.runtimecheck import RECHECK_SECONDS, trivial_container_problem

CONTAINER = "container"
HOST = "host"
AUTO = "auto"
POLICIES = (AUTO, CONTAINER, HOST)
RUNTIMES = ("podman",)
DEFAULT_TASK_USER = "nobody"
DEFAULT_PIDS_LIMIT = 8192
RUNTIME_ENV = (
    "CONTAINERS_CONF",
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINERS_STORAGE_CONF",
    "REGISTRY_AUTH_FILE",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "TMPDIR",
    CDI_DIRS_VARIABLE,
)
"""The runtime's own configuration, as the administrator points to it (and where the node's CDI
specs are, `pai.cluster.cdispecs`): passed to the runtime's processes, never into a task."""


class IsolationError(ValueError):
    """The isolation settings are wrong; the message names the setting."""


@dataclass(frozen=True)
class IsolationPolicy:
    """The administrator's choice for every node (see the module docstring)."""

    mode: str = HOST
    runtime: str = ""
    """`podman`, or "" to look for one on the PATH."""
    task_user: str = ""
    """Whom host tasks run as when PAI runs as root; "" keeps PAI's own user."""
    pids_limit: int = DEFAULT_PIDS_LIMIT
    """The most processes and threads one container may have."""

    def __post_init__(self) -> None:
        if self.mode not in POLICIES:
            raise IsolationError(
                f"PAI_ISOLATION: must be one of {', '.join(POLICIES)}, got {self.mode!r}"
            )
        if self.runtime and self.runtime not in RUNTIMES:
            raise IsolationError(
                f"PAI_CONTAINER_RUNTIME: {self.runtime!r} is not supported; PAI runs tasks "
                "with podman (which runs the same images as docker)"
            )
        if self.pids_limit < 64:
            raise IsolationError(f"PAI_TASK_PIDS_LIMIT: must be at least 64, got {self.pids_limit}")

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class TaskUser:
    """The unprivileged user host tasks run as."""

    name: str
    uid: int
    gid: int

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskUser:
        return cls(str(data["name"]), int(data["uid"]), int(data["gid"]))


@dataclass(frozen=True)
class NodeIsolation:
    """How this node runs tasks: `mode` with its runtime or task user; `problem` when it can
    run none (containers are required and it has no runtime)."""

    mode: str
    runtime: str | None = None
    """The runtime's executable, in container mode."""
    runtime_version: str = ""
    runtime_problem: str | None = None
    """What the runtime said when a trivial container failed to start as the node resolved
    its isolation (`runtimecheck`): the node takes no tasks until a check succeeds."""
    task_user: TaskUser | None = None
    """Host tasks run as this user (None: as PAI's own)."""
    problem: str | None = None

    def describe(self) -> str:
        """One sentence for `pai up` and the portal."""
        if self.problem is not None:
            return f"this node takes no tasks: {self.problem}"
        if self.mode == CONTAINER and self.runtime_problem is not None:
            return (
                f"this node takes no tasks while {self.runtime_version} cannot start a "
                f"container: {self.runtime_problem} (checked again every "
                f"{RECHECK_SECONDS:g} s; tasks run in containers once it can)"
            )
        if self.mode == CONTAINER:
            return (
                f"tasks run in containers of their jobs' images ({self.runtime_version}, "
                "which started a test container)"
            )
        who = self.task_user.name if self.task_user else _current_user()
        warning = (
            "" if self.task_user else "; they can read what PAI's user can (PAI's home included)"
        )
        return (
            f"tasks run directly on the host as user {who}, not in their jobs' images (no "
            f"container runtime: install podman to run them in containers){warning}"
        )


def resolve(policy: IsolationPolicy) -> NodeIsolation:
    """What `policy` means on this node."""
    if policy.mode != HOST:
        runtime = _find_runtime(policy.runtime)
        if runtime is not None:
            version, problem = _runtime_version(runtime)
            if problem is None:
                return NodeIsolation(
                    CONTAINER,
                    runtime=runtime,
                    runtime_version=version,
                    runtime_problem=trivial_container_problem(runtime, os.environ),
                )
            if policy.mode == CONTAINER:
                return NodeIsolation(CONTAINER, problem=problem)
        elif policy.mode == CONTAINER:
            wanted = policy.runtime or "podman"
            return NodeIsolation(
                CONTAINER,
                problem=f"PAI_ISOLATION=container, but {wanted} is not installed on this node",
            )
    return NodeIsolation(HOST, task_user=_task_user(policy.task_user))


def _find_runtime(name: str) -> str | None:
    for candidate in (name,) if name else RUNTIMES:
        found = shutil.which(candidate)
        if found is not None:
            return found
    return None


def _runtime_version(runtime: str) -> tuple[str, str | None]:
    """The runtime's version, or why it cannot be used (it answers with an error)."""
    try:
        done = subprocess.run(
            [runtime, "version", "--format", "{{.Client.Version}}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return "", f"{runtime} does not answer: {error}"
    if done.returncode != 0:
        why = (done.stderr.strip() or done.stdout.strip())[-500:]
        return "", f"{runtime} fails on this node: {why}"
    return f"{Path(runtime).name} {done.stdout.strip()}", None


def _task_user(name: str) -> TaskUser | None:
    """The user host tasks run as: only when PAI runs as root, and not root itself."""
    if os.geteuid() != 0 or not name:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise IsolationError(
            f"PAI_TASK_USER: there is no user {name!r} on this node (host tasks run as it "
            "when PAI runs as root)"
        ) from None
    if entry.pw_uid == 0:
        return None
    return TaskUser(name, entry.pw_uid, entry.pw_gid)


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
