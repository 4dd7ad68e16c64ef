"""A task run in a container of its job's image (see `pai.executors.isolation.runtime`).

The supervisor starts the container with `podman run --detach`; podman leaves behind its
monitor (conmon), which is re-parented to the supervisor (a child subreaper), stays for the
container's life and records how it ended. The container's first process is in a cgroup of its
own with all the task's processes: signals go to every process of that cgroup, and the
container has ended when its monitor has. Then the runtime says the exit status and whether
the kernel killed it for memory, and the container is removed.

An image the node lacks is pulled first (its tag `latest`: every time); the script reaches the
container's shell through a pipe only when the supervisor says so (after the SSH server and
barrier, when the job asked for them).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pai.executors.isolation.host import feed, reap_orphans
from pai.executors.isolation.images import (
    PullFailed,
    RegistryAuth,
    auth_file,
    by_digest,
    full_name,
    present_digest,
    pull,
    pull_lock,
    pulled_every_time,
)
from pai.executors.isolation.mounts import Mount, MountFailed, prepare_source
from pai.executors.isolation.pullrecords import PullRecords
from pai.executors.isolation.runtime import (
    RUNTIME_TIMEOUT,
    SCRIPT_FD,
    ContainerError,
    ContainerLimits,
    device_arguments,
    inspect_exit,
    rdma_arguments,
    remove,
    run_command,
)
from pai.executors.node.cgroups import Cgroup, OomWatch
from pai.executors.node.taskfiles import Exited, LaunchRecord, ProcessIdentity, TaskFiles
from pai.runtime.classification import ExitCode

ENV_FILE = "container.env"
PID_FILE = "container.pid"
MONITOR_PID_FILE = "conmon.pid"
RUNTIME_OUTPUT = "runtime-output.log"
IMAGE_MISSING = "image not known"
KILL_RETRY_INTERVAL = 0.05
KILL_TIMEOUT = 30.0
STARTED_TIMEOUT = 30.0
"""How long the container's shell may take to say it started, once podman says it runs."""


class StartFailed(Exception):
    """The container could not be started; `code` is the PAI exit code that says why."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ContainerPlan:
    """What the executor decided about the task's container, beyond the launch itself."""

    runtime: str
    name: str
    labels: Mapping[str, str]
    pids_limit: int
    locks_dir: Path
    """Where the node's pulls take turns (one lock file per image)."""
    pull_records: Path
    """Where the node remembers which credentials pulled each image (`PullRecords`)."""


class ContainerRun:
    """One container task from its image to its end (see the module docstring)."""

    isolation = "container"

    def __init__(
        self,
        record: LaunchRecord,
        files: TaskFiles,
        plan: ContainerPlan,
        runtime_env: Mapping[str, str],
        auth: RegistryAuth | None,
        note: Callable[[str], None],
        progress: Callable[[str], None],
    ) -> None:
        assert record.docker_image is not None
        self._record = record
        self._files = files
        self._plan = plan
        self._env = dict(runtime_env)
        self._auth = auth
        self._note = note
        self._progress = progress
        self._image = full_name(record.docker_image)
        self._pid: ProcessIdentity | None = None
        self._monitor: ProcessIdentity | None = None
        self._cgroup: Cgroup | None = None
        self._oom: OomWatch | None = None
        self._stdout: IO[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._script_fd: int | None = None

    @property
    def name(self) -> str:
        return self._plan.name

    @property
    def identity(self) -> ProcessIdentity:
        assert self._pid is not None
        return self._pid

    @property
    def stdout(self) -> IO[bytes]:
        assert self._stdout is not None
        return self._stdout

    @property
    def stderr(self) -> IO[bytes]:
        assert self._stderr is not None
        return self._stderr

    # -- start ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Pull the image if needed and start the container; its shell then waits for the
        script (`feed`). Raises StartFailed, PullFailed or MountFailed."""
        pulled = False
        if pulled_every_time(self._image):
            self._pull()
            pulled = True
        else:
            self._check_access()
        binds = self._binds()
        try:
            self._run(binds)
        except _ImageMissing:
            if pulled:
                raise StartFailed(
                    f"image {self._image} was pulled but the runtime does not find it",
                    ExitCode.CONTAINER_CREATION_ERROR,
                ) from None
            self._pull()
            self._run(binds)

    def _pull(self) -> None:
        self._progress(f"pulling image {self._image}")
        self._note(f"pulling image {self._image}")
        with (
            pull_lock(self._plan.locks_dir, self._image),
            auth_file(self._files.directory, self._image, self._auth) as credentials,
        ):
            pull(
                self._plan.runtime,
                self._image,
                credentials=credentials,
                env=self._env,
                on_progress=self._progress,
            )
            PullRecords(self._plan.pull_records).remember(self._image, self._auth)
        self._note(f"pulled image {self._image}")

    def _check_access(self) -> None:
        """Use an image the node has only if this task's credentials may pull it: those that
        pulled it here, or what its registry accepts now for the manifest the node has (see
        `pullrecords`). An image the node lacks is pulled with them instead (`start`)."""
        records = PullRecords(self._plan.pull_records)
        with pull_lock(self._plan.locks_dir, self._image):
            if records.allows(self._image, self._auth):
                return
            digest = present_digest(self._plan.runtime, self._image, self._env)
            if digest is None:
                return
            self._note(f"asking the registry whether this task may pull image {self._image}")
            with auth_file(self._files.directory, self._image, self._auth) as credentials:
                try:
                    pull(
                        self._plan.runtime,
                        by_digest(self._image, digest),
                        credentials=credentials,
                        env=self._env,
                        on_progress=lambda _: None,
                    )
                except PullFailed as failed:
                    raise PullFailed(
                        f"image {self._image} is on this node, but its registry does not let "
                        f"this task's credentials pull it: {failed}",
                        permanent=failed.permanent,
                    ) from None
            records.remember(self._image, self._auth)

    def _binds(self) -> list[Mount]:
        """The task's directories and storages, at the paths they have on the node."""
        record = self._record
        binds = [Mount(str(record.working_dir), str(record.working_dir))]
        previous = record.previous_working_dir
        if previous is not None and previous.is_dir() and previous != record.working_dir:
            binds.append(Mount(str(previous), str(previous), read_only=True))
        for mount in record.mounts:
            prepare_source(mount)
            binds.append(mount)
        return binds

    def _run(self, binds: list[Mount]) -> None:
        record, plan = self._record, self._plan
        device_options, device_env = device_arguments(record.device_kind, record.gpus)
        if record.rdma:
            device_options += rdma_arguments()
        env_file = self._files.path(ENV_FILE)
        _write_env_file(env_file, {**record.env, **device_env})
        pidfile, monitor_file = self._files.path(PID_FILE), self._files.path(MONITOR_PID_FILE)
        try:
            command = run_command(
                plan.runtime,
                name=plan.name,
                image=self._image,
                labels=plan.labels,
                env_file=env_file,
                working_dir=record.working_dir,
                binds=binds,
                limits=ContainerLimits(
                    memory_mb=record.memory_mb,
                    cpus=record.cpus,
                    shm_mb=record.shm_mb,
                    pids=plan.pids_limit,
                ),
                device_arguments=device_options,
                pidfile=pidfile,
                conmon_pidfile=monitor_file,
            )
        except ContainerError as error:
            raise MountFailed(str(error), transient=False) from None
        script_read, script_write = os.pipe()
        started_read, started_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        given = (script_read, started_write, out_write, err_write)
        try:
            status, said = self._start(command, given)
        finally:
            for descriptor in given:
                os.close(descriptor)
        if status != 0:
            for descriptor in (script_write, started_read, out_read, err_read):
                os.close(descriptor)
            self._remove_quietly()
            raise _start_failure(self._image, status, said)
        self._stdout = os.fdopen(out_read, "rb", buffering=0)
        self._stderr = os.fdopen(err_read, "rb", buffering=0)
        self._script_fd = script_write
        self._pid = _identity_in(pidfile)
        self._monitor = _identity_in(monitor_file)
        if self._pid is not None:
            self._cgroup = Cgroup.of_pid(self._pid.pid)
        if self._cgroup is not None:
            self._oom = self._cgroup.oom_watch()
        started = _read_started(started_read)
        os.close(started_read)
        if not started or self._pid is None:
            self._remove_quietly()
            raise StartFailed(
                f"the container of image {self._image} started, but its shell did not",
                ExitCode.CONTAINER_START_UNKNOWN_ERROR,
            )

    def _start(self, command: list[str], given: tuple[int, ...]) -> tuple[int, str]:
        """Run `podman run --detach` with `given` as the container's descriptors 3-6; its
        status and what it said (which goes to the runtime log, never the task's)."""
        output_path = self._files.path(RUNTIME_OUTPUT)
        with open(output_path, "wb") as output:
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    env=self._env,
                    close_fds=False,  # only descriptors 0-6 are inheritable
                    preexec_fn=_descriptors_from_3(given),
                )
            except OSError as error:
                raise StartFailed(
                    f"cannot run {self._plan.runtime}: {error}",
                    ExitCode.POD_CREATION_TRANSIENT_ERROR,
                ) from None
            try:
                status = process.wait(RUNTIME_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                status = -1
        said = output_path.read_text(errors="replace").strip()
        if said:
            self._note(f"{Path(self._plan.runtime).name} run: {said[-2000:]}")
        if status == -1:
            return status, f"{Path(self._plan.runtime).name} run did not answer in time"
        return status, said

    def feed(self, script: bytes) -> None:
        """Give the container's shell its script (once)."""
        descriptor, self._script_fd = self._script_fd, None
        assert descriptor is not None, "the script was given already"
        prefix = f"exec {SCRIPT_FD}<&-\n".encode()
        threading.Thread(target=feed, args=(descriptor, prefix + script), daemon=True).start()

    # -- while it runs ----------------------------------------------------------------------------

    def running(self) -> bool:
        """Until the container's monitor has recorded its end."""
        monitor = self._monitor or self._pid
        return monitor is not None and monitor.alive()

    def resident_bytes(self) -> int | None:
        return None  # the kernel holds the container to its memory limit

    def signal(self, signum: int) -> None:
        """`signum` to every process of the container."""
        for pid in self._pids():
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                continue

    def has_processes(self) -> bool:
        return bool(self._pids())

    def kill(self) -> list[int]:
        """SIGKILL the container's processes until none is left; those that outlived it."""
        deadline = time.monotonic() + KILL_TIMEOUT
        while remaining := self._pids():
            if time.monotonic() > deadline:
                return remaining
            self.signal(signal.SIGKILL)
            time.sleep(KILL_RETRY_INTERVAL)
        return []

    def tick(self) -> None:
        """Collect the container's monitor and its clean-up once they exit (both are
        re-parented to the supervisor)."""
        reap_orphans(None)

    def _pids(self) -> list[int]:
        if self._cgroup is not None:
            return self._cgroup.pids()
        return [self._pid.pid] if self._pid is not None and self._pid.alive() else []

    # -- end --------------------------------------------------------------------------------------

    def finish(self) -> Exited:
        """How the container ended (after it has), once; then it is removed."""
        deadline = time.monotonic() + KILL_TIMEOUT
        while self.running() and time.monotonic() < deadline:
            time.sleep(KILL_RETRY_INTERVAL)
        try:
            ended = inspect_exit(self._plan.runtime, self.name, self._env)
        except (ContainerError, ValueError) as error:
            self._note(f"the runtime cannot say how the container ended: {error}")
            ended = Exited(ExitCode.RUNTIME_UNKNOWN_FAILED, oom_killed=False)
        self._remove_quietly()
        if self._oom is not None and self._oom.killed():
            return Exited(ended.status, oom_killed=True)
        return ended

    def _remove_quietly(self) -> None:
        try:
            remove(self._plan.runtime, self.name, self._env)
        except ContainerError as error:
            self._note(f"the container could not be removed: {error}")
        for name in (ENV_FILE, PID_FILE, MONITOR_PID_FILE):
            self._files.path(name).unlink(missing_ok=True)


class _ImageMissing(StartFailed):
    pass


def _start_failure(image: str, status: int, said: str) -> StartFailed:
    """What a failed `podman run` means for the task."""
    last = said.splitlines()[-1].removeprefix("Error: ") if said else f"exit status {status}"
    if IMAGE_MISSING in said:
        missing = f"image {image} is not on this node"
        return _ImageMissing(missing, ExitCode.CONTAINER_CREATION_ERROR)
    if status == 127:
        message = f"image {image} has no /bin/sh, which PAI runs the task's commands with: {last}"
        return StartFailed(message, ExitCode.CONTAINER_START_CMD_NOT_FOUND)
    if status == 126:
        message = f"the container's /bin/sh cannot be run: {last}"
        return StartFailed(message, ExitCode.CONTAINER_START_CMD_PERMISSION_DENIED)
    if "device" in said.lower() and ("cdi" in said.lower() or "nvidia" in said.lower()):
        return StartFailed(
            f"the task's GPUs cannot be given to its container: {last}",
            ExitCode.CONTAINER_GPU_DEVICE_NOT_FOUND,
        )
    if status == -1:
        return StartFailed(last, ExitCode.POD_CREATION_TRANSIENT_ERROR)
    return StartFailed(
        f"the runtime cannot create the task's container: {last}",
        ExitCode.CONTAINER_CREATION_ERROR,
    )


def _write_env_file(path: Path, env: Mapping[str, str]) -> None:
    lines = []
    for name, value in env.items():
        if "\n" in value or "\n" in name:
            raise StartFailed(
                f"variable {name} holds a line break, which a container's environment cannot",
                ExitCode.POD_CREATION_PERMANENT_ERROR,
            )
        lines.append(f"{name}={value}\n")
    path.write_text("".join(lines))


def _descriptors_from_3(given: tuple[int, ...]) -> Callable[[], None]:
    """A pre-exec step that makes `given` the child's descriptors 3, 4, ... (podman passes
    them on, in that order, with --preserve-fds)."""

    def arrange() -> None:
        # First out of the way (a source may sit where another goes), then into place.
        moved = [fcntl.fcntl(descriptor, fcntl.F_DUPFD, 100) for descriptor in given]
        for target, descriptor in enumerate(moved, start=SCRIPT_FD):
            os.dup2(descriptor, target)  # the copy is inheritable
            os.close(descriptor)

    return arrange


def _identity_in(path: Path) -> ProcessIdentity | None:
    try:
        return ProcessIdentity.of(int(path.read_text().strip()))
    except (FileNotFoundError, ValueError):
        return None


def _read_started(descriptor: int) -> bool:
    """Whether the container's shell said it runs (before the pipe closed, or the timeout)."""
    ready, _, _ = select.select([descriptor], [], [], STARTED_TIMEOUT)
    return bool(ready) and os.read(descriptor, 1) == b"1"
