"""The seam between the platform and wherever tasks run.

Like JupyterHub's Spawner, an executor is a small interface with one implementation per backend
(local processes, Kubernetes Pods, a simulator). The controller decides *what* runs; an executor
only runs it, reports what happened, and can find its tasks again after a control-plane restart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.executors.isolation.images import RegistryAuth
from pai.executors.isolation.mounts import Mount
from pai.runtime.classification import Classification, ExitCode

if TYPE_CHECKING:
    from pai.executors.node.usage import Usage

TASK_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.~-]{0,199}$")


class ExecutorError(Exception):
    """An executor cannot do what it was asked; the message says which task and why."""


class UnknownTaskError(ExecutorError, KeyError):
    """No task attempt with this key was ever launched by this executor."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown task"


def check_task_key(key: str) -> str:
    """Task keys name directories and Pods, so they are restricted to a safe alphabet."""
    if not TASK_KEY_PATTERN.match(key) or ".." in key:
        raise ExecutorError(
            f"task key {key!r} must be 1-200 characters of letters, digits and '_.~-', "
            "start with a letter or digit, and not contain '..'"
        )
    return key


@dataclass(frozen=True)
class TaskLaunch:
    """Everything needed to run one attempt of one task; `key` is unique per attempt.

    `script` is the final bash script with secrets substituted, `image_auth` the credentials
    of the image's registry and `ssh_server` the keys of the task's SSH server:
    executors hand them to the task's supervisor and never store or log them (they are left
    out of `repr`).
    """

    key: str
    job: str
    role: str
    index: int
    job_attempt: int
    task_attempt: int
    node: str
    address: str
    script: str = field(repr=False)
    env: Mapping[str, str]
    working_dir: Path
    log_dir: Path
    memory_mb: int | None = None
    gpus: Sequence[int] = ()
    """The node's devices the task has (their indices), of kind `device_kind`."""
    device_kind: str = DEFAULT_DEVICE_KIND
    rdma: bool = False
    """Give the task the node's RDMA devices and an unlimited locked-memory limit."""
    ports: Mapping[str, Sequence[int]] = field(default_factory=dict)
    docker_image: str | None = None
    mounts: tuple[Mount, ...] = ()
    """Storages the task sees at their mount paths (`pai.executors.isolation.mounts`)."""
    stop_grace_seconds: float | None = None
    """From SIGTERM to SIGKILL when the task is stopped (None: the executor's default)."""
    cpus: float | None = None
    """CPUs the job asked for (a container's CPU quota)."""
    shm_mb: int | None = None
    """Size of a container's /dev/shm."""
    previous_working_dir: Path | None = None
    """The working directory of the task's previous attempt, on this node if it ran here."""
    isolation: str | None = None
    """The isolation the script was built for ("host" or "container"); the node must agree."""
    image_auth: RegistryAuth | None = field(default=None, repr=False)
    ssh_server: str | None = field(default=None, repr=False)
    """For a container task of an ssh-enabled job: the keys of its SSH server, which runs on
    the node and opens each session inside the container."""


class KillReason(Enum):
    """Why the controller ends a task; each reason completes the task with its OpenPAI code."""

    STOP_REQUESTED = ExitCode.STOP_FRAMEWORK_REQUESTED
    ATTEMPT_COMPLETED = ExitCode.FRAMEWORK_ATTEMPT_COMPLETION
    SCALED_DOWN = ExitCode.DELETE_TASK_REQUESTED
    PREEMPTED = ExitCode.POD_EXTERNAL_DELETED
    FENCED = ExitCode.POD_NODE_LOST
    """Not the controller: a node's agent that lost the control plane for longer than the node
    timeout stops the node's tasks, which the control plane has given up as lost."""

    @property
    def exit_code(self) -> int:
        return int(self.value)


class LogStream(StrEnum):
    """The log files of a task, named as OpenPAI's runtime names them."""

    STDOUT = "user-stdout"
    STDERR = "user-stderr"
    ALL = "user-all"
    RUNTIME = "runtime.log"


@dataclass(frozen=True)
class TaskResult:
    """How a task attempt ended. `isolation` says what separated the task from its node:
    "host" (its commands ran directly on the node) or "container" (in its image)."""

    classification: Classification
    started_at: datetime | None
    finished_at: datetime
    isolation: str

    @property
    def exit_code(self) -> int:
        """The PAI exit code (see `classification.origin_exit_code` for the process status)."""
        return self.classification.code

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "classification": self.classification.to_dict(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat(),
            "isolation": self.isolation,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskResult:
        started = data.get("started_at")
        return cls(
            classification=Classification.from_dict(data["classification"]),
            started_at=datetime.fromisoformat(started) if started else None,
            finished_at=datetime.fromisoformat(data["finished_at"]),
            isolation=str(data["isolation"]),
        )


class TaskEventKind(StrEnum):
    PREPARING = "preparing"
    STARTED = "started"
    FINISHED = "finished"


@dataclass(frozen=True)
class TaskEvent:
    """Something happened to a task attempt: what it waits for before its command starts
    (`message`, e.g. an image being pulled), its command started, or it ended (`result`)."""

    key: str
    kind: TaskEventKind
    at: datetime
    result: TaskResult | None = None
    message: str = ""


class TaskPhase(StrEnum):
    PREPARING = "preparing"  # the executor accepted it; the command has not started yet
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class TaskStatus:
    """A task attempt as the executor finds it (see `Executor.recover`)."""

    key: str
    job: str
    role: str
    index: int
    job_attempt: int
    task_attempt: int
    node: str
    phase: TaskPhase
    started_at: datetime | None = None
    result: TaskResult | None = None
    stop_grace_seconds: float | None = None
    """Its grace period between SIGTERM and SIGKILL, where the executor knows it."""


class NodeCondition(StrEnum):
    """A node as the engine that runs tasks sees it."""

    ALIVE = "alive"  # the engine has the node, as large as the cluster file says
    GONE = "gone"  # the engine does not have it: never joined, stopped, crashed or unreachable
    UNREACHABLE = "unreachable"  # the engine has it, but PAI's calls to it go unanswered
    BAD = "bad"  # the engine has it, but it cannot take PAI's tasks (smaller than declared, ...)
    CORDONED = "cordoned"  # an administrator, or an alert, took it out of scheduling


@dataclass(frozen=True)
class NodeState:
    """One node of the cluster file as the engine sees it; `message` says why when not alive."""

    node: str
    condition: NodeCondition
    message: str = ""

    @property
    def usable(self) -> bool:
        return self.condition is NodeCondition.ALIVE


class Executor(Protocol):
    """Runs task attempts and reports on them. Implementations must be safe to call from the
    controller's thread while other threads read logs."""

    def isolation_on(self, node: str) -> str:
        """What separates a task from `node`, shown with every task: "host" (commands run
        directly on the node, `dockerImage` only recorded), "container" or "simulated"."""

    def attempt_dir(self, node: str, job: str, key: str) -> Path:
        """Where the working and log directories of attempt `key` of `job` go, on `node`."""

    def node_states(self) -> Mapping[str, NodeState]:
        """The engine's view of the cluster file's nodes, by name; a node left out is alive.
        Cheap (the controller asks every pass); it changes when nodes leave or join."""

    def launch(self, task: TaskLaunch) -> None:
        """Start the task attempt and return at once; a key launched before raises ExecutorError.
        A launch that fails later ends the task with a FINISHED event saying why."""

    def kill(self, key: str, reason: KillReason) -> None:
        """Ask the task to end (SIGTERM, then SIGKILL after a grace period) and return at once;
        its FINISHED event carries the reason's code. Killing a finished task does nothing; an
        unknown key raises UnknownTaskError (as do `logs` and `follow_logs`)."""

    def events(self) -> list[TaskEvent]:
        """What happened since the last call, oldest first. Cheap enough to poll several times
        a second with hundreds of tasks."""

    def recover(self) -> list[TaskStatus]:
        """After a control-plane restart: every task attempt this executor knows, running or
        finished, and resume reporting on those still running. A task whose supervision was lost
        is reported finished with a transient platform code."""

    def usage(self) -> Usage:
        """What the running tasks and the machines used, measured since the last call (the
        monitor asks every few seconds)."""

    def logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = None
    ) -> bytes:
        """The retained log of a task (the last `tail` bytes when given)."""

    def follow_logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = 0
    ) -> Iterator[bytes]:
        """New log data as it is written, starting `tail` bytes back (None: the whole retained
        log), until the task has ended and everything is read."""
