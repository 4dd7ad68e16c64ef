"""Runs tasks on this machine, each under a supervisor that outlives the platform.

Every node of the cluster file maps to its own loopback address (127.0.0.N) on this machine, so
multi-node jobs are real here: each task binds its node's address and reaches its peers at
theirs. Where a task runs is the machine's isolation (`pai.executors.isolation.policy`): in a
container of its job's image, or directly on the host, which runtime.log, the task's placement
and its result say (`isolation`).

State lives in `<state_dir>/tasks/<task key>/` (see `pai.executors.node.taskfiles`); logs live in
the launch's log directory. Polling `events()` looks only at the tasks still running, with one or
two `open` calls each, and checks a supervisor's pid (with its start time, against pid reuse) once a
`liveness_interval`.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from pai.diskfloor import RoomWatch
from pai.executors.base import (
    Executor,
    ExecutorError,
    KillReason,
    LogStream,
    NodeCondition,
    NodeState,
    TaskEvent,
    TaskEventKind,
    TaskLaunch,
    TaskPhase,
    TaskResult,
    TaskStatus,
    UnknownTaskError,
    check_task_key,
)
from pai.executors.isolation.policy import CONTAINER, RUNTIME_ENV, NodeIsolation, resolve
from pai.executors.isolation.runtime import ContainerError, container_name, names_labelled, remove
from pai.executors.isolation.runtimecheck import RECHECK_SECONDS, RuntimeHealth
from pai.executors.node.launcher import SupervisorLauncher
from pai.executors.node.logfiles import follow_log, read_log
from pai.executors.node.taskfiles import (
    MIB,
    LaunchRecord,
    StartedCommand,
    SupervisorConfig,
    TaskFiles,
    utc_now,
)
from pai.executors.node.usage import RunningTask, Usage, UsageSampler
from pai.runtime.classification import ExitCode
from pai.runtime.exitspec import ExitSpecSource

log = logging.getLogger(__name__)

TASKS_DIR = "tasks"
EXECUTOR_ID_FILE = "executor-id"
EXECUTOR_LABEL = "pai.executor"


@dataclass
class _Tracked:
    """A task attempt still running, as far as this executor has seen."""

    files: TaskFiles
    record: LaunchRecord
    started_reported: bool
    next_liveness_check: float = 0.0
    progress_reported_at: float = 0.0

    def running(self) -> RunningTask | None:
        """The task as usage sampling sees it, once its command runs."""
        supervisor = self.files.supervisor()
        if not self.started_reported or supervisor is None:
            return None
        record = self.record
        limit = record.memory_mb * MIB if record.memory_mb else None
        started = self.files.started() if record.container_name else None
        container = started.identity.pid if started is not None else None
        return RunningTask(
            record.key,
            record.job,
            record.role,
            record.index,
            record.node,
            container or supervisor.pid,
            limit,
            record.gpus,
            in_container=container is not None,
            device_kind=record.device_kind,
        )


class LocalExecutor(Executor):
    """The `Executor` of the embedded, one-machine installation."""

    def __init__(
        self,
        state_dir: Path,
        *,
        jobs_dir: Path | None = None,
        config: SupervisorConfig | None = None,
        exit_specs: ExitSpecSource | None = None,
        liveness_interval: float = 1.0,
        machine: str | None = None,
        nodes: Sequence[str] = (),
        runtime_recheck_seconds: float = RECHECK_SECONDS,
    ) -> None:
        """`jobs_dir` holds the attempts' working and log directories; by default `jobs` beside
        `state_dir` (both in `$PAI_HOME` when the platform runs it). `machine` names this
        machine in usage samples (default: its host name); `nodes` are the cluster file's
        nodes it runs, all on this machine; `runtime_recheck_seconds`, how often a container
        runtime found failing is checked again."""
        self._tasks_dir = state_dir / TASKS_DIR
        self._tasks_dir.mkdir(parents=True, exist_ok=True)
        self._jobs_dir = jobs_dir or state_dir.parent / "jobs"
        self._id = _executor_id(state_dir)
        self._nodes = tuple(nodes)
        self._exit_specs = exit_specs or ExitSpecSource()
        admin_path = self._exit_specs.admin_path
        # Supervisors classify with the same administrator's rules as the control plane.
        self._config = replace(
            config or SupervisorConfig(), exit_spec_path=str(admin_path) if admin_path else None
        )
        self.node_isolation: NodeIsolation = resolve(self._config.isolation)
        self._room = RoomWatch(self._jobs_dir, self._config.disk_floor)
        self._hidden_root = _private_root(self._jobs_dir.parent)
        self._runtime_env = {
            name: os.environ[name]
            for name in (*self._config.inherit_env, *RUNTIME_ENV)
            if name in os.environ
        }
        self._runtime_health: RuntimeHealth | None = None
        runtime = self.node_isolation.runtime
        if runtime is not None:
            self._runtime_health = RuntimeHealth(
                runtime, self._runtime_env, state_dir, recheck_seconds=runtime_recheck_seconds
            )
            self._runtime_health.record(self.node_isolation.runtime_problem)
        self._liveness_interval = liveness_interval
        self._lock = threading.Lock()
        self._live: dict[str, _Tracked] = {}
        # Supervisors get only the environment tasks inherit, so that the platform's settings
        # do not linger in them either.
        names = (*self._config.inherit_env, *RUNTIME_ENV, "PYTHONPATH")
        self._launcher = SupervisorLauncher(
            self._tasks_dir, {name: os.environ[name] for name in names if name in os.environ}
        )
        self._machine = machine or socket.gethostname()
        self._sampler: UsageSampler | None = None  # made on first use: it starts CPU counting

    def attempt_dir(self, node: str, job: str, key: str) -> Path:
        return self._jobs_dir / job / check_task_key(key)

    def isolation_on(self, node: str) -> str:
        return self.node_isolation.mode

    def node_states(self) -> Mapping[str, NodeState]:
        """Every node is an address of this machine, alive while PAI runs, unless the machine
        cannot run tasks as its isolation requires, its container runtime fails, or its disk
        is under PAI's floor."""
        problem = self.node_isolation.problem or self.node_problem()
        if problem is None:
            return {}
        return {node: NodeState(node, NodeCondition.BAD, problem) for node in self._nodes}

    def node_problem(self) -> str | None:
        """Why no task may start here for now: the container runtime cannot start a
        container, or the disk is under PAI's floor (None while tasks may start)."""
        health = self._runtime_health
        return (health.problem() if health else None) or self.disk_problem()

    def disk_problem(self) -> str | None:
        """Why no task may start here for lack of disk space (None while there is room)."""
        room = self._room.current()
        return f"node {room.shortage()}" if room.low else None

    def launch(self, task: TaskLaunch) -> None:
        isolation = self.node_isolation
        problem = isolation.problem or self.node_problem()
        if problem is not None:
            raise ExecutorError(f"task {task.key}: {problem}")
        if task.isolation is not None and task.isolation != isolation.mode:
            raise ExecutorError(
                f"task {task.key} was prepared for isolation {task.isolation!r}, but this node "
                f"runs tasks with {isolation.mode!r}"
            )
        if isolation.mode == CONTAINER and not task.docker_image:
            raise ExecutorError(f"task {task.key}: a task in a container needs an image")
        files = TaskFiles(self._tasks_dir / check_task_key(task.key))
        try:
            task.working_dir.mkdir(parents=True, exist_ok=True)
            task.log_dir.mkdir(parents=True, exist_ok=True)
            if isolation.task_user is not None:
                user = isolation.task_user
                os.chown(task.working_dir, user.uid, user.gid)
                task.working_dir.chmod(0o700)
        except OSError as exc:
            raise ExecutorError(f"task {task.key}: cannot prepare its directories: {exc}") from exc
        try:
            files.directory.mkdir()  # claims the key: a second launch of it fails here
        except FileExistsError:
            raise ExecutorError(f"task {task.key} was launched before") from None
        record = LaunchRecord.of(task, self._config, utc_now(), **self._decided(task))
        secrets = {
            "image_auth": task.image_auth.to_dict() if task.image_auth else None,
            "ssh_server": task.ssh_server,
        }
        try:
            files.write_launch(record)
            # In a session of its own: a signal to the platform's process group (Ctrl-C, a
            # service manager stopping it) does not reach running tasks.
            self._launcher.start(
                files.directory, task.log_dir / LogStream.RUNTIME, task.script, secrets
            )
        except OSError as exc:
            shutil.rmtree(files.directory, ignore_errors=True)
            raise ExecutorError(f"task {task.key}: cannot start its supervisor: {exc}") from exc
        with self._lock:
            self._live[task.key] = _Tracked(files, record, started_reported=False)

    def _decided(self, task: TaskLaunch) -> dict[str, Any]:
        """What this node decides about the task: its isolation, container or task user."""
        isolation = self.node_isolation
        if isolation.mode == CONTAINER:
            return {
                "isolation": CONTAINER,
                "runtime": isolation.runtime,
                "container_name": container_name(self._id, task.key),
                "container_labels": {
                    EXECUTOR_LABEL: self._id,
                    "pai.task": task.key,
                    "pai.job": task.job,
                },
            }
        hidden = str(self._hidden_root) if isolation.task_user else None
        return {
            "isolation": isolation.mode,
            "task_user": isolation.task_user,
            "hidden_root": hidden,
        }

    def kill(self, key: str, reason: KillReason) -> None:
        files = self._files(key)
        with self._lock:
            if files.has_result():
                return
            files.write_kill_reason(reason)
            supervisor = files.supervisor()
            process = supervisor.process() if supervisor else None
            if process is not None:
                try:
                    process.send_signal(signal.SIGTERM)
                    return
                except psutil.NoSuchProcess:
                    pass
            self._finish_lost(files)

    def events(self) -> list[TaskEvent]:
        found: list[TaskEvent] = []
        now = time.monotonic()
        with self._lock:
            for key, tracked in list(self._live.items()):
                if not tracked.started_reported:
                    found.extend(self._progress(tracked))
                    started = tracked.files.started()
                    if started is not None:
                        tracked.started_reported = True
                        found.append(TaskEvent(key, TaskEventKind.STARTED, started.started_at))
                result = tracked.files.result()
                if result is None and now >= tracked.next_liveness_check:
                    tracked.next_liveness_check = now + self._liveness_interval
                    if not self._supervisor_alive(tracked):
                        result = self._finish_lost(tracked.files)
                if result is None:
                    continue
                del self._live[key]
                if not tracked.started_reported and result.started_at is not None:
                    found.append(TaskEvent(key, TaskEventKind.STARTED, result.started_at))
                found.append(TaskEvent(key, TaskEventKind.FINISHED, result.finished_at, result))
        return found

    @staticmethod
    def _progress(tracked: _Tracked) -> list[TaskEvent]:
        """What the supervisor does before the command starts, when it said something new."""
        progress = tracked.files.progress()
        if progress is None or progress[0] <= tracked.progress_reported_at:
            return []
        tracked.progress_reported_at = progress[0]
        at = datetime.fromtimestamp(progress[0], UTC)
        return [TaskEvent(tracked.record.key, TaskEventKind.PREPARING, at, message=progress[1])]

    def recover(self) -> list[TaskStatus]:
        self._launcher.warm()  # the platform is about to launch: have the launcher ready
        statuses = []
        with self._lock:
            for directory in sorted(self._tasks_dir.iterdir()):
                files = TaskFiles(directory)
                record = files.launch()
                if record is None:
                    log.warning("%s: no launch record, ignored", directory)
                    continue
                started = files.started()
                result = files.result()
                if result is None and directory.name not in self._live:
                    tracked = _Tracked(files, record, started_reported=started is not None)
                    if self._supervisor_alive(tracked):
                        self._live[directory.name] = tracked
                    else:
                        result = self._finish_lost(files)
                statuses.append(_status(record, started, result))
            self._remove_leftover_containers()
        return statuses

    def _remove_leftover_containers(self) -> None:
        """Remove this executor's containers whose tasks have ended (a supervisor removes its
        task's container itself, unless it was killed first)."""
        runtime = self.node_isolation.runtime
        if runtime is None:
            return
        try:
            names = set(names_labelled(runtime, f"{EXECUTOR_LABEL}={self._id}", self._runtime_env))
        except ContainerError as error:
            log.warning("cannot list this node's task containers: %s", error)
            return
        running = {container_name(self._id, key) for key in self._live}
        for name in sorted(names - running):
            _remove_container(runtime, name, self._runtime_env)

    def usage(self) -> Usage:
        with self._lock:
            running = [task for tracked in self._live.values() if (task := tracked.running())]
            if self._sampler is None:
                self._sampler = UsageSampler(self._machine, self._jobs_dir)
            sampler = self._sampler
        return sampler.sample(running)

    def logs(
        self, key: str, stream: LogStream = LogStream.ALL, *, tail: int | None = None
    ) -> bytes:
        return read_log(self.log_path(key, stream), tail)

    def follow_logs(
        self,
        key: str,
        stream: LogStream = LogStream.ALL,
        *,
        tail: int | None = 0,
        poll_interval: float = 0.2,
    ) -> Iterator[bytes]:
        files = self._files(key)
        return follow_log(
            self.log_path(key, stream), files.has_result, tail=tail, poll_interval=poll_interval
        )

    def _files(self, key: str) -> TaskFiles:
        files = TaskFiles(self._tasks_dir / check_task_key(key))
        if not files.directory.is_dir():
            raise UnknownTaskError(f"no task attempt {key!r} was launched here")
        return files

    def log_path(self, key: str, stream: LogStream) -> Path:
        """Where a task attempt's stream is written."""
        record = self._files(key).launch()
        if record is None:
            raise UnknownTaskError(f"task attempt {key!r} has no launch record")
        return record.log_dir / stream

    def _supervisor_alive(self, tracked: _Tracked) -> bool:
        identity = tracked.files.supervisor()
        if identity is not None and identity.alive():
            return True
        # A detached supervisor records itself in place of its starter just before the starter
        # exits: a dead starter read a moment ago may already have been replaced.
        recorded = tracked.files.supervisor()
        return recorded is not None and recorded != identity and recorded.alive()

    def _finish_lost(self, files: TaskFiles) -> TaskResult:
        """A supervisor died without a result (killed, machine rebooted): end what it left
        behind and record a transient platform failure, so the task is retried for free (or
        the code of the stop the controller had asked for)."""
        result = files.result()  # it may have written one just before exiting
        if result is not None:
            return result
        identity = files.supervisor()
        pid = f"pid {identity.pid}" if identity else "never recorded"
        message = f"the task's supervisor ({pid}) ended without recording how the task ended"
        log.warning("task %s: %s", files.key, message)
        reason = files.kill_reason()
        code = reason.exit_code if reason else ExitCode.POD_EXTERNAL_DELETED
        started = files.started()
        record = files.launch()
        if record is not None and record.runtime and record.container_name:
            _remove_container(record.runtime, record.container_name, self._runtime_env)
        elif started is not None:
            _kill_group(started)
        result = TaskResult(
            self._exit_specs.current().for_code(code, diagnostics=(message,)),
            started.started_at if started else None,
            utc_now(),
            record.isolation if record else self.node_isolation.mode,
        )
        files.write_result(result)
        return result


def kill_processes_under(directory: Path) -> None:
    """SIGKILL every process whose command line names a path under `directory`, with all its
    descendants, and remove the task containers of the executors whose state is there.
    Supervisors and containers outlive the platform by design; this ends those of a home that
    is about to be deleted (a benchmark's or a test's)."""
    _remove_containers_under(directory)
    under = f"{directory}{os.sep}"
    named = [
        process
        for process in psutil.process_iter(["cmdline"])
        if under in " ".join(process.info["cmdline"] or [])
    ]
    doomed = {process.pid: process for process in named}
    for process in named:
        try:
            doomed.update({child.pid: child for child in process.children(recursive=True)})
        except psutil.NoSuchProcess:
            continue
    for process in doomed.values():
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(list(doomed.values()), timeout=10)


def _remove_containers_under(directory: Path) -> None:
    runtime = shutil.which("podman")
    if runtime is None:
        return
    env = {name: os.environ[name] for name in (*RUNTIME_ENV, "PATH") if name in os.environ}
    for id_file in directory.glob(f"**/{EXECUTOR_ID_FILE}"):
        try:
            names = names_labelled(runtime, f"{EXECUTOR_LABEL}={id_file.read_text()}", env)
        except (ContainerError, OSError):
            continue
        for name in names:
            _remove_container(runtime, name, env)


def _remove_container(runtime: str, name: str, env: Mapping[str, str]) -> None:
    try:
        remove(runtime, name, env)
    except ContainerError as error:
        log.warning("container %s could not be removed: %s", name, error)


def _executor_id(state_dir: Path) -> str:
    """This executor's id, made once: it names (and labels) its containers, so that several
    installations can share a node's container runtime."""
    path = state_dir / EXECUTOR_ID_FILE
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return path.read_text().strip()
    identifier = secrets.token_hex(4)
    with os.fdopen(descriptor, "w") as file:
        file.write(identifier)
    return identifier


def _private_root(state: Path) -> Path:
    """The folder a task user's view covers to hide `state` (PAI's home, or a node's
    directory): the highest folder above it that others may not pass, else `state` itself.
    Covering it also keeps the path to the task's own directories passable in that view."""
    hidden = state
    for folder in state.parents:
        if folder == Path(folder.anchor):
            break
        try:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                hidden = folder
        except OSError:
            break
    return hidden


def _kill_group(started: StartedCommand) -> None:
    """SIGKILL what is left of a task's process group, sparing processes that merely reuse its
    id: only members started no earlier than the task's command are killed."""
    for process in psutil.process_iter(["create_time"]):
        try:
            if (
                os.getpgid(process.pid) == started.pgid
                and process.info["create_time"] >= started.identity.create_time
            ):
                process.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            continue


def _status(
    record: LaunchRecord, started: StartedCommand | None, result: TaskResult | None
) -> TaskStatus:
    if result is not None:
        phase = TaskPhase.FINISHED
    elif started is not None:
        phase = TaskPhase.RUNNING
    else:
        phase = TaskPhase.PREPARING
    return TaskStatus(
        key=record.key,
        job=record.job,
        role=record.role,
        index=record.index,
        job_attempt=record.job_attempt,
        task_attempt=record.task_attempt,
        node=record.node,
        phase=phase,
        started_at=started.started_at if started else (result.started_at if result else None),
        result=result,
        stop_grace_seconds=record.config.stop_grace_seconds,
    )
