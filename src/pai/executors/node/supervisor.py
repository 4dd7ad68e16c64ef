"""Runs one task attempt on its node and records how it ended.

The executor has `pai.executors.node.launcher` fork a supervisor per task, in a session of its own,
and hand it the task's script (and its other secrets: registry credentials, SSH keys). The
supervisor outlives the control plane, so a restart of the platform leaves running tasks alone;
the executor finds them again through the task directory (see `pai.executors.node.taskfiles`).

What it does for the task, in order: checks that the task's ports are free on its node address
(busy: 253, as OpenPAI's port checker); starts the task as its node's isolation says, in a container
of its image (`pai.executors.isolation.container`, pulling the image first when needed) or on the
host (`pai.executors.isolation.host`, storages mounted in a mount namespace of the task's own);
copies the task's stdout and stderr into capped log files; ends the task on request (SIGTERM to
every process of it, then SIGKILL after the grace period) or when it exceeds memoryMB (the kernel's
OOM kill in a container; on the host the supervisor watches the resident memory of the task's
processes and kills them, code -1200 either way), and finally classifies the exit with the exit spec
and writes result.json atomically.

The supervisor makes itself a child subreaper, so processes the task orphans (daemonised,
`setsid`), and a container's monitor, stay its descendants: none of them survives the task.
On the host, memory is enforced by watching RSS rather than by RLIMIT_AS, because address-space
limits break programs that reserve large virtual ranges without using them (CUDA, JVMs).

The script reaches the supervisor in memory and the task's shell through a pipe, never through a
file or the command line, because it carries the job's secrets.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from datetime import datetime
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

from pai.diskfloor import RoomWatch
from pai.executors.base import LogStream, TaskResult
from pai.executors.isolation.container import ContainerPlan, ContainerRun, StartFailed
from pai.executors.isolation.host import HostRun, kill_descendants
from pai.executors.isolation.images import PullFailed, RegistryAuth
from pai.executors.isolation.mounts import MountFailed
from pai.executors.isolation.policy import CONTAINER, RUNTIME_ENV
from pai.executors.isolation.runtimecheck import RuntimeHealth
from pai.executors.node.logfiles import READ_CHUNK, CappedLogWriter, read_log
from pai.executors.node.taskfiles import (
    MIB,
    Exited,
    LaunchRecord,
    ProcessIdentity,
    StartedCommand,
    TaskFiles,
    utc_now,
)
from pai.runtime.classification import Classification, ExitCode, diagnostic_lines
from pai.runtime.ports import is_port_free

if TYPE_CHECKING:
    from pai.runtime.exitspec import ExitSpec

RUNTIME_LOG_TAIL_BYTES = 64 * 1024
KILL_RETRY_INTERVAL = 0.05
PUMP_JOIN_TIMEOUT = 5.0
SSH_READY_TIMEOUT = 30.0
SSH_DIR = ".pai-ssh"
IMAGE_LOCKS_DIR = "image-locks"
IMAGE_PULLS_DIR = "image-pulls"
RESULT_RETRY_INTERVAL = 1.0
_PR_SET_CHILD_SUBREAPER = 36


class _Ending(Enum):
    EXITED = "exited"
    STOPPED = "stopped"
    OUT_OF_MEMORY = "out of memory"
    LIFELINE_LOST = "lifeline lost"


class TaskRun(Protocol):
    """A started task, on the host or in a container, as the supervisor handles it."""

    isolation: str

    @property
    def identity(self) -> ProcessIdentity: ...
    @property
    def stdout(self) -> IO[bytes]: ...
    @property
    def stderr(self) -> IO[bytes]: ...
    def feed(self, script: bytes) -> None: ...
    def running(self) -> bool: ...
    def resident_bytes(self) -> int | None: ...
    def signal(self, signum: int) -> None: ...
    def has_processes(self) -> bool: ...
    def kill(self) -> list[int]: ...
    def tick(self) -> None: ...
    def finish(self) -> Exited: ...


class Supervisor:
    """Supervises one task attempt from start to result."""

    def __init__(
        self, files: TaskFiles, record: LaunchRecord, script: bytes, secrets: dict[str, Any]
    ) -> None:
        self._files = files
        self._record = record
        self._config = record.config
        self._script = script
        auth = secrets.get("image_auth")
        self._image_auth = RegistryAuth(**auth) if auth else None
        ssh_server = secrets.get("ssh_server")
        self._ssh_request: dict[str, Any] | None = json.loads(ssh_server) if ssh_server else None
        self._stop_signal: int | None = None
        self._started_at: datetime | None = None
        self._resident_at_kill = 0
        self._runtime_log = open(  # noqa: SIM115 - open for the supervisor's whole life
            record.log_dir / LogStream.RUNTIME, "a", encoding="utf-8", buffering=1
        )

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_stop_signal)
        _become_child_subreaper()
        record = self._record
        if self._files.has_result():
            # The node's executor judged this supervisor dead while it was still detaching
            # and ended the attempt: the platform may be running its retry already.
            self._note("the attempt was given up before its supervisor ran: nothing is started")
            return 0
        self._note(
            f"task {record.key}: role {record.role} index {record.index}, job {record.job} "
            f"attempt {record.job_attempt}, task attempt {record.task_attempt}, "
            f"node {record.node} ({record.address})"
        )
        self._note(self._where())
        try:
            classification = self._run_task()
        except Exception as exc:  # whatever breaks, the task must still get a result
            self._note("the runtime failed:\n" + traceback.format_exc())
            kill_descendants()
            code = (
                ExitCode.POD_EXTERNAL_DELETED
                if self._started_at
                else ExitCode.POD_CREATION_TRANSIENT_ERROR
            )
            classification = self._spec().for_code(
                code, diagnostics=(f"the task's runtime failed: {exc!r}",)
            )
        result = TaskResult(classification, self._started_at, utc_now(), record.isolation)
        self._note(f"finished: exit code {result.exit_code} ({classification.phrase})")
        self._record_result(result)
        with contextlib.suppress(OSError):
            self._runtime_log.close()
        return 0

    def _record_result(self, result: TaskResult) -> None:
        """Write how the task ended, waiting for room on a full disk: the platform learns it
        from this file alone, however long that takes. A result already there is the node
        executor's, which gave the attempt up and reported it first: it stays."""
        if self._files.has_result():
            self._note("the platform had already ended this attempt: its record stays")
            return
        while True:
            try:
                self._files.write_result(result)
                return
            except OSError as error:
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                time.sleep(RESULT_RETRY_INTERVAL)

    def _where(self) -> str:
        record = self._record
        if record.isolation == CONTAINER:
            return f"runs in a container of image {record.docker_image} ({record.container_name})"
        who = f"as user {record.task_user.name}" if record.task_user else "as PAI's own user"
        return (
            f"runs directly on the node's host {who}; its image "
            f"{record.docker_image or '(none)'} is recorded only"
        )

    def _run_task(self) -> Classification:
        if self._lifeline_lost():
            return self._lifeline_lost_classification(None)
        busy = [
            port
            for ports in self._record.ports.values()
            for port in ports
            if not is_port_free(self._record.address, port)
        ]
        if busy:
            message = f"ports {busy} are already in use on {self._record.address}"
            self._note(message)
            return self._spec().for_code(ExitCode.CONTAINER_PORT_CONFLICT, diagnostics=(message,))
        if self._stop_requested():
            return self._stopped_classification(None)
        writers = self._open_logs()
        try:
            try:
                task = self._start()
            except MountFailed as failed:
                return self._mount_failed_classification(failed)
            except PullFailed as failed:
                return self._start_failed_classification(
                    str(failed),
                    ExitCode.CONTAINER_IMAGE_NOT_EXISTS
                    if failed.permanent
                    else ExitCode.POD_CREATION_TRANSIENT_ERROR,
                )
            except StartFailed as failed:
                return self._start_failed_classification(*self._start_failure(failed))
            failure = None
            if self._ssh_request is not None:
                failure = self._start_ssh_server(task)  # running means it can be reached
            self._started_at = utc_now()
            container = self._record.container_name if task.isolation == CONTAINER else None
            self._files.write_started(StartedCommand(task.identity, self._started_at, container))
            self._note(f"command started: pid {task.identity.pid}")
            pumps = self._start_pumps(task, writers)
            ending = self._feed_and_watch(task, failure)
            exited = task.finish()
            left = task.kill()
            left += kill_descendants()  # what else it left (an SSH server, helpers)
            if left:
                self._note(f"processes {left} outlived SIGKILL; left behind")
            for pump in pumps:
                pump.join(PUMP_JOIN_TIMEOUT)
        finally:
            for writer in writers.values():
                writer.close()
        status = exited.status
        self._note(f"command exited with status {status}")
        if ending is _Ending.STOPPED:
            return self._stopped_classification(status)
        if ending is _Ending.LIFELINE_LOST:
            return self._lifeline_lost_classification(status)
        if ending is _Ending.OUT_OF_MEMORY or exited.oom_killed:
            return self._out_of_memory_classification(status)
        return self._spec().classify(
            status,
            self._read_log(LogStream.ALL, self._config.classify_tail_bytes),
            self._read_log(LogStream.RUNTIME, RUNTIME_LOG_TAIL_BYTES),
        )

    def _start(self) -> TaskRun:
        record = self._record
        if record.isolation != CONTAINER:
            host = HostRun(record, self._inherited_env())
            host.start()
            return host
        assert record.runtime is not None and record.container_name is not None
        node_dir = self._node_dir()
        plan = ContainerPlan(
            runtime=record.runtime,
            name=record.container_name,
            labels=record.container_labels,
            pids_limit=self._config.isolation.pids_limit,
            locks_dir=node_dir / IMAGE_LOCKS_DIR,
            pull_records=node_dir / IMAGE_PULLS_DIR,
        )
        container = ContainerRun(
            record,
            self._files,
            plan,
            self._runtime_env(),
            self._image_auth,
            note=self._note,
            progress=self._files.write_progress,
        )
        container.start()
        return container

    def _inherited_env(self) -> dict[str, str]:
        """What of this process's environment the task inherits."""
        return {name: os.environ[name] for name in self._config.inherit_env if name in os.environ}

    def _runtime_env(self) -> dict[str, str]:
        """The environment of the container runtime's commands: the runtime's configuration
        as the administrator points to it, beside what tasks inherit."""
        own = {name: os.environ[name] for name in RUNTIME_ENV if name in os.environ}
        return {**self._inherited_env(), **own}

    def _node_dir(self) -> Path:
        """The executor's state directory on this node, which its tasks' directories are in."""
        return self._files.directory.parent.parent

    def _feed_and_watch(self, task: TaskRun, failure: bytes | None) -> _Ending:
        """The task gets its script (once the job's other tasks accept SSH, when it asked for
        that barrier), or the script that fails it saying why; then it is watched to its
        end."""
        if failure is None and self._ssh_request is not None:
            failure = self._ssh_barrier(self._ssh_request.get("barrier_seconds"))
        # Starting its SSH server and the barrier may take long: a stop that came meanwhile,
        # or a give-up by the node's executor, means the command must never start.
        if self._stop_requested() or self._files.has_result():
            self._terminate(task)
            return _Ending.STOPPED
        if self._lifeline_lost():
            self._terminate(task)
            return _Ending.LIFELINE_LOST
        task.feed(failure or self._script)
        return self._watch(task)

    def _stop_requested(self) -> bool:
        """A stop signal arrived, or the platform recorded a stop: one it signalled to the
        process that started this supervisor, before the supervisor had recorded itself."""
        return self._stop_signal is not None or self._files.kill_reason() is not None

    def _start_ssh_server(self, task: TaskRun) -> bytes | None:
        """Start the task's SSH server on the node, outside the task, whose sessions open
        inside it (its container, or its view of the node as its user), and wait until it
        listens; None then, else a script that fails the task saying why. It runs with PAI's
        Python, which the task's own user may not be able to reach."""
        assert self._ssh_request is not None
        directory = self._record.working_dir / SSH_DIR
        ready = directory / "ready"
        ready.unlink(missing_ok=True)
        keys = dict(self._ssh_request["keys"])
        if isinstance(task, ContainerRun):
            assert self._record.runtime is not None
            inside = ["--container", self._record.runtime, task.name]
        else:
            assert isinstance(task, HostRun)
            user = self._record.task_user
            ids = [str(user.uid), str(user.gid)] if user is not None else []
            inside = ["--host", str(task.identity.pid), *ids]
            keys["environment"] = task.env
        env = {**os.environ, **self._record.env}
        with open(self._record.log_dir / "sshd.log", "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "pai.runtime.sshd", str(directory), *inside],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        assert server.stdin is not None
        server.stdin.write(json.dumps(keys).encode())
        server.stdin.close()
        deadline = time.monotonic() + SSH_READY_TIMEOUT
        while (
            not ready.exists()
            and server.poll() is None
            and self._stop_signal is None
            and time.monotonic() < deadline
        ):
            time.sleep(KILL_RETRY_INTERVAL)
        if ready.exists() or self._stop_signal is not None:
            return None
        message = "[pai] ssh plugin: the task's SSH server did not start"
        self._note(message)
        return _failing_script(message, 1)

    def _ssh_barrier(self, seconds: float | None) -> bytes | None:
        """Wait for the job's other tasks to accept SSH (OpenPAI's `sshbarrier`); None when
        they do (or no barrier was asked), else a script that fails the task saying why."""
        from pai.runtime.sshbarrier import BARRIER_FAILED, unreachable_peers

        if seconds is None:
            return None
        missing = unreachable_peers(self._record.env, float(seconds))
        if not missing:
            return None
        message = f"[pai] SSH barrier reaches max retry count: {', '.join(missing)} not reachable"
        self._note(message)
        return _failing_script(message, BARRIER_FAILED)

    def _open_logs(self) -> dict[LogStream, CappedLogWriter]:
        """The task's log files, written while their disk has room above PAI's floor."""
        cap = self._config.log_cap_bytes
        room = RoomWatch(self._record.log_dir, self._config.disk_floor)
        return {
            stream: CappedLogWriter(self._record.log_dir / stream, cap, room)
            for stream in (LogStream.STDOUT, LogStream.STDERR, LogStream.ALL)
        }

    def _start_pumps(
        self, task: TaskRun, writers: dict[LogStream, CappedLogWriter]
    ) -> list[threading.Thread]:
        pumps = []
        for pipe, stream in ((task.stdout, LogStream.STDOUT), (task.stderr, LogStream.STDERR)):
            pump = threading.Thread(
                target=_pump, args=(pipe, writers[stream], writers[LogStream.ALL]), daemon=True
            )
            pump.start()
            pumps.append(pump)
        return pumps

    def _watch(self, task: TaskRun) -> _Ending:
        """Wait for the task to end by itself, by a stop request, or by using too much memory
        on the host (then killed at once, as the kernel's OOM killer would)."""
        limit = self._record.memory_mb * MIB if self._record.memory_mb else None
        while task.running():
            if self._stop_signal is not None:
                self._terminate(task)
                return _Ending.STOPPED
            if self._lifeline_lost():
                self._note("the node's engine process ended: stopping the task")
                self._terminate(task)
                return _Ending.LIFELINE_LOST
            resident = task.resident_bytes() if limit is not None else None
            if limit is not None and resident is not None and resident > limit:
                self._resident_at_kill = resident
                self._note(
                    f"memory {resident // MIB} MB exceeds memoryMB {self._record.memory_mb}: "
                    "killing the task"
                )
                task.kill()
                return _Ending.OUT_OF_MEMORY
            task.tick()
            time.sleep(self._config.poll_interval)
        return _Ending.EXITED

    def _terminate(self, task: TaskRun) -> None:
        """SIGTERM every process of the task, then SIGKILL whatever is left after the grace
        period."""
        self._note(f"stopping: SIGTERM, SIGKILL after {self._config.stop_grace_seconds:g}s")
        task.signal(signal.SIGTERM)
        deadline = time.monotonic() + self._config.stop_grace_seconds
        while time.monotonic() < deadline and task.has_processes():
            time.sleep(KILL_RETRY_INTERVAL)
        task.kill()

    def _stopped_classification(self, status: int | None) -> Classification:
        reason = self._files.kill_reason()
        if reason is not None:
            message = f"stopped by the platform: {reason.name.lower().replace('_', ' ')}"
            code = reason.exit_code
        elif self._stop_signal is not None:
            name = signal.Signals(self._stop_signal).name
            message = f"the task's supervisor received {name} from outside the platform"
            code = ExitCode.POD_EXTERNAL_DELETED
        else:  # the node's executor ended the attempt while its SSH server started
            message = "the platform had given the attempt up: its command was not started"
            code = ExitCode.POD_EXTERNAL_DELETED
        self._note(message)
        return self._spec().for_code(code, origin_exit_code=status, diagnostics=(message,))

    def _start_failure(self, failed: StartFailed) -> tuple[str, int]:
        """What a container that did not start means: the node's fault when its runtime cannot
        start even a trivial container (checked now, and recorded for the node, which then
        takes no tasks until it can), so that the task is retried as a platform failure;
        else the task's, as `failed` says."""
        record = self._record
        if record.runtime is None:
            return str(failed), failed.code
        problem = RuntimeHealth(record.runtime, self._runtime_env(), self._node_dir()).check()
        if problem is None:
            return str(failed), failed.code
        message = (
            f"{failed}; this node's container runtime cannot start a container ({problem}): "
            "the task is retried, and the node takes no tasks until its runtime works"
        )
        return message, ExitCode.POD_NODE_ADMISSION_UNEXPECTED_ERROR

    def _mount_failed_classification(self, failed: MountFailed) -> Classification:
        code = (
            ExitCode.POD_CREATION_TRANSIENT_ERROR
            if failed.transient
            else ExitCode.POD_CREATION_PERMANENT_ERROR
        )
        return self._start_failed_classification(
            f"the task's storages cannot be mounted: {failed}", code
        )

    def _start_failed_classification(self, message: str, code: int) -> Classification:
        self._note(message)
        return self._spec().for_code(code, diagnostics=(message,))

    def _lifeline_lost(self) -> bool:
        lifeline = self._config.lifeline
        return lifeline is not None and not lifeline.alive()

    def _lifeline_lost_classification(self, status: int | None) -> Classification:
        lifeline = self._config.lifeline
        pid = lifeline.pid if lifeline else None
        message = f"the node left the cluster: its engine process (pid {pid}) ended"
        self._note(message)
        return self._spec().for_code(
            ExitCode.POD_NODE_LOST, origin_exit_code=status, diagnostics=(message,)
        )

    def _out_of_memory_classification(self, status: int) -> Classification:
        used = (
            f"used {self._resident_at_kill // MIB} MB of memory, more than"
            if self._resident_at_kill
            else "needed more memory than"
        )
        message = f"the task {used} its memoryMB of {self._record.memory_mb}, and was killed"
        output = self._read_log(LogStream.ALL, self._config.classify_tail_bytes)
        return self._spec().for_code(
            ExitCode.USER_CONTAINER_OOM_KILLED,
            origin_exit_code=status,
            diagnostics=(message, *diagnostic_lines(output, None)),
        )

    def _spec(self) -> ExitSpec:
        """The exit spec, loaded when the task ends. The rule engine (pydantic, YAML) is imported
        only then: resident in every running supervisor it would cost ~20 MB per task."""
        from pai.runtime.exitspec import ExitSpecSource

        path = self._config.exit_spec_path
        source = ExitSpecSource(Path(path) if path else None)
        if source.last_error:
            self._note(f"administrator's exit spec ignored: {source.last_error}")
        return source.current()

    def _read_log(self, stream: LogStream, tail: int) -> str:
        return read_log(self._record.log_dir / stream, tail).decode("utf-8", errors="replace")

    def _note(self, message: str) -> None:
        line = f"{utc_now().isoformat(timespec='milliseconds')} [pai] {message}\n"
        with contextlib.suppress(OSError):  # a full disk must not end the supervisor
            self._runtime_log.write(line)

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop_signal = signum


def _failing_script(message: str, code: int) -> bytes:
    """A script that says `message` on stderr and exits with `code`."""
    quoted = "'" + message.replace("'", "'\\''") + "'"
    return f"echo {quoted} >&2\nexit {code}\n".encode()


def _pump(pipe: IO[bytes], own: CappedLogWriter, combined: CappedLogWriter) -> None:
    fd = pipe.fileno()
    while chunk := os.read(fd, READ_CHUNK):
        own.write(chunk)
        combined.write(chunk)
    pipe.close()


def _become_child_subreaper() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def supervise(files: TaskFiles, script: bytes, secrets: dict[str, Any] | None = None) -> int:
    """Run the task recorded in `files` with `script` (and `secrets`: registry credentials,
    SSH keys); the process's exit code. The caller (`pai.executors.node.launcher`) has made this
    process a session of its own and recorded it."""
    record = files.launch()
    if record is None:
        print(f"{files.directory}: no launch record", file=sys.stderr)
        return 2
    if record.config.detach:
        _detach(files)
    return Supervisor(files, record, script, secrets or {}).run()


def _detach(files: TaskFiles) -> None:
    """Go on in a child in a session of its own and let this process exit once that child has
    recorded itself, so the supervisor is no longer a child of whoever started it."""
    ready, signal_ready = os.pipe()
    if os.fork() > 0:
        os.close(signal_ready)
        os.read(ready, 1)
        os._exit(0)
    os.close(ready)
    os.setsid()
    identity = ProcessIdentity.of(os.getpid())
    assert identity is not None
    files.write_supervisor(identity)
    os.write(signal_ready, b"1")
    os.close(signal_ready)
