"""The files through which the local executor and a task's supervisor talk.

Each task attempt owns one directory in the executor's state directory:

    launch.json      written by the executor before the supervisor starts (never the script)
    supervisor.json  pid and start time of the supervisor
    progress.json    what the supervisor is doing before the command starts (pulling an image)
    started.json     pid and start time of the task's command (its process group leader, or
                     the first process of its container)
    kill.json        why the controller asked the task to end
    result.json      how the task ended; written last, atomically

Every file is written whole (temporary file, rename), so a reader sees either nothing or a
complete file, whichever process crashes when. The records that must survive the machine
(launch, kill, result) are also synced to disk before the rename; supervisor.json and
started.json name processes that a crash of the machine ends anyway, so they are not: a sync
costs several milliseconds on the way from a launch to the task's start.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from pai.cluster.devices import DEFAULT_DEVICE_KIND
from pai.diskfloor import DiskFloor
from pai.executors.base import KillReason, TaskLaunch, TaskResult
from pai.executors.isolation.mounts import Mount
from pai.executors.isolation.policy import HOST, IsolationPolicy, TaskUser

LAUNCH_FILE = "launch.json"
SUPERVISOR_FILE = "supervisor.json"
STARTED_FILE = "started.json"
PROGRESS_FILE = "progress.json"
KILL_FILE = "kill.json"
RESULT_FILE = "result.json"

MIB = 1024 * 1024
# What a task inherits from the platform's own environment; everything else comes from the launch,
# so that the platform's settings (a database password) never leak into a task.
DEFAULT_INHERITED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
)


@dataclass(frozen=True)
class SupervisorConfig:
    """How supervisors run tasks; fixed per executor and recorded with every launch."""

    log_cap_bytes: int = 64 * MIB  # kept per stream: user-stdout, user-stderr, user-all
    stop_grace_seconds: float = 10.0  # from SIGTERM to SIGKILL, unless the launch says otherwise
    poll_interval: float = 0.2  # how often memory use and stop requests are checked
    # How much of the output's end the exit spec reads. OpenPAI reads 10 MB; the errors worth
    # recognising are at the very end, and 10 MB of regexes cost about 2 s per failed task.
    classify_tail_bytes: int = MIB
    inherit_env: tuple[str, ...] = DEFAULT_INHERITED_ENV
    exit_spec_path: str | None = None  # the administrator's exit spec, if any
    # A process whose end ends the task (under Ray: the node's raylet, so that no task outlives
    # its node's membership in the cluster, when PAI has already retried it elsewhere).
    lifeline: ProcessIdentity | None = None
    # The supervisor leaves the tree of the process that starts it (Ray kills a worker's children
    # when the worker exits, and a task must outlive the Ray worker that started it).
    detach: bool = False
    isolation: IsolationPolicy = field(default_factory=IsolationPolicy)
    disk_floor: DiskFloor = field(default_factory=DiskFloor)
    """Free space kept on the disk of tasks' directories for PAI's store (`pai.diskfloor`)."""

    def __post_init__(self) -> None:
        if self.log_cap_bytes < 2:
            raise ValueError(f"log_cap_bytes must be at least 2, got {self.log_cap_bytes}")
        if self.stop_grace_seconds < 0 or self.poll_interval <= 0:
            raise ValueError("stop_grace_seconds must be >= 0 and poll_interval > 0")

    def to_dict(self) -> dict[str, Any]:
        return {
            **vars(self),
            "inherit_env": list(self.inherit_env),
            "lifeline": self.lifeline.to_dict() if self.lifeline else None,
            "isolation": self.isolation.to_dict(),
            "disk_floor": self.disk_floor.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SupervisorConfig:
        lifeline = data.get("lifeline")
        return cls(
            **{
                **data,
                "inherit_env": tuple(data["inherit_env"]),
                "lifeline": ProcessIdentity.from_dict(lifeline) if lifeline else None,
                "isolation": IsolationPolicy(**data.get("isolation", {})),
                "disk_floor": DiskFloor(**data["disk_floor"])
                if "disk_floor" in data
                else DiskFloor(),
            }
        )


@dataclass(frozen=True)
class LaunchRecord:
    """A launch as stored in launch.json: the task without its script, and the config."""

    key: str
    job: str
    role: str
    index: int
    job_attempt: int
    task_attempt: int
    node: str
    address: str
    env: dict[str, str]
    working_dir: Path
    log_dir: Path
    memory_mb: int | None
    gpus: tuple[int, ...]
    ports: dict[str, tuple[int, ...]]
    docker_image: str | None
    launched_at: datetime
    config: SupervisorConfig
    mounts: tuple[Mount, ...] = ()
    cpus: float | None = None
    shm_mb: int | None = None
    previous_working_dir: Path | None = None
    isolation: str = HOST
    """What separates the task from the node, as the node decided: "host" or "container"."""
    runtime: str | None = None
    """The container runtime's executable (containers only)."""
    container_name: str | None = None
    container_labels: dict[str, str] = field(default_factory=dict)
    task_user: TaskUser | None = None
    """The unprivileged user a host task runs as (None: as PAI's own user)."""
    hidden_root: str | None = None
    """For a task user: the folder covered in its view, holding PAI's state."""
    device_kind: str = DEFAULT_DEVICE_KIND
    """The CDI kind of `gpus`."""
    rdma: bool = False

    @classmethod
    def of(
        cls,
        task: TaskLaunch,
        config: SupervisorConfig,
        launched_at: datetime,
        **decided: Any,
    ) -> LaunchRecord:
        """The record of `task`, whose own grace period (if it has one) replaces the config's;
        `decided` holds what the executor chose (isolation, container, task user)."""
        if task.stop_grace_seconds is not None:
            config = replace(config, stop_grace_seconds=task.stop_grace_seconds)
        return cls(
            key=task.key,
            job=task.job,
            role=task.role,
            index=task.index,
            job_attempt=task.job_attempt,
            task_attempt=task.task_attempt,
            node=task.node,
            address=task.address,
            env=dict(task.env),
            working_dir=task.working_dir,
            log_dir=task.log_dir,
            memory_mb=task.memory_mb,
            gpus=tuple(task.gpus),
            device_kind=task.device_kind,
            rdma=task.rdma,
            ports={label: tuple(ports) for label, ports in task.ports.items()},
            docker_image=task.docker_image,
            launched_at=launched_at,
            config=config,
            mounts=task.mounts,
            cpus=task.cpus,
            shm_mb=task.shm_mb,
            previous_working_dir=task.previous_working_dir,
            **decided,
        )

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data.update(
            working_dir=str(self.working_dir),
            log_dir=str(self.log_dir),
            gpus=list(self.gpus),
            ports={label: list(ports) for label, ports in self.ports.items()},
            launched_at=self.launched_at.isoformat(),
            config=self.config.to_dict(),
            mounts=[asdict(mount) for mount in self.mounts],
            previous_working_dir=str(self.previous_working_dir)
            if self.previous_working_dir
            else None,
            task_user=self.task_user.to_dict() if self.task_user else None,
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchRecord:
        return cls(
            **{
                **data,
                "working_dir": Path(data["working_dir"]),
                "log_dir": Path(data["log_dir"]),
                "gpus": tuple(data["gpus"]),
                "ports": {label: tuple(ports) for label, ports in data["ports"].items()},
                "launched_at": datetime.fromisoformat(data["launched_at"]),
                "config": SupervisorConfig.from_dict(data["config"]),
                "mounts": tuple(Mount(**mount) for mount in data.get("mounts", ())),
                "previous_working_dir": Path(data["previous_working_dir"])
                if data.get("previous_working_dir")
                else None,
                "task_user": TaskUser.from_dict(data["task_user"])
                if data.get("task_user")
                else None,
            }
        )


def utc_now() -> datetime:
    return datetime.now(UTC)


def write_json_atomic(path: Path, data: Any, *, durable: bool = True) -> None:
    """Replace `path` with `data` as JSON so that no reader ever sees a partial file; if
    `durable`, the new file is on disk when this returns."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_json(path: Path) -> Any:
    """The file's content, or None when it does not exist (yet), or is empty or torn: what a
    write that was not synced leaves after the machine crashed."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as (pid, start time): a pid alone may be reused by an unrelated process."""

    pid: int
    create_time: float

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        try:
            return cls(pid, psutil.Process(pid).create_time())
        except psutil.NoSuchProcess:
            return None

    def process(self) -> psutil.Process | None:
        """The live process with this identity, or None if it has exited (zombies included)."""
        try:
            process = psutil.Process(self.pid)
            if process.create_time() != self.create_time:
                return None
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.NoSuchProcess:
            return None
        return process

    def alive(self) -> bool:
        return self.process() is not None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "create_time": self.create_time}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessIdentity:
        return cls(int(data["pid"]), float(data["create_time"]))


@dataclass(frozen=True)
class StartedCommand:
    """The task's command once running: its process (on the host, the leader of its own
    process group; in a container, the container's first process)."""

    identity: ProcessIdentity
    started_at: datetime
    container: str | None = None

    @property
    def pgid(self) -> int:
        return self.identity.pid

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.identity.to_dict(),
            "started_at": self.started_at.isoformat(),
            "container": self.container,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StartedCommand:
        return cls(
            ProcessIdentity.from_dict(data),
            datetime.fromisoformat(data["started_at"]),
            data.get("container"),
        )


@dataclass(frozen=True)
class Exited:
    """How a task's command ended: its shell-style status, and whether the kernel killed it
    for exceeding its memory limit."""

    status: int
    oom_killed: bool = False


class TaskFiles:
    """Paths and typed access to one task attempt's directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def key(self) -> str:
        return self.directory.name

    def path(self, name: str) -> Path:
        return self.directory / name

    def launch(self) -> LaunchRecord | None:
        data = read_json(self.path(LAUNCH_FILE))
        return LaunchRecord.from_dict(data) if data else None

    def write_launch(self, record: LaunchRecord) -> None:
        write_json_atomic(self.path(LAUNCH_FILE), record.to_dict())

    def has_result(self) -> bool:
        return self.path(RESULT_FILE).exists()

    def result(self) -> TaskResult | None:
        data = read_json(self.path(RESULT_FILE))
        return TaskResult.from_dict(data) if data else None

    def write_result(self, result: TaskResult) -> None:
        write_json_atomic(self.path(RESULT_FILE), result.to_dict())

    def started(self) -> StartedCommand | None:
        data = read_json(self.path(STARTED_FILE))
        return StartedCommand.from_dict(data) if data else None

    def write_started(self, started: StartedCommand) -> None:
        write_json_atomic(self.path(STARTED_FILE), started.to_dict(), durable=False)

    def progress(self) -> tuple[float, str] | None:
        """What the supervisor said it is doing before the command starts, with when."""
        data = read_json(self.path(PROGRESS_FILE))
        return (float(data["at"]), str(data["message"])) if data else None

    def write_progress(self, message: str) -> None:
        write_json_atomic(
            self.path(PROGRESS_FILE), {"at": time.time(), "message": message}, durable=False
        )

    def kill_reason(self) -> KillReason | None:
        data = read_json(self.path(KILL_FILE))
        return KillReason[data["reason"]] if data else None

    def write_kill_reason(self, reason: KillReason) -> None:
        write_json_atomic(self.path(KILL_FILE), {"reason": reason.name, "code": reason.exit_code})

    def supervisor(self) -> ProcessIdentity | None:
        data = read_json(self.path(SUPERVISOR_FILE))
        return ProcessIdentity.from_dict(data) if data else None

    def write_supervisor(self, identity: ProcessIdentity) -> None:
        write_json_atomic(self.path(SUPERVISOR_FILE), identity.to_dict(), durable=False)
