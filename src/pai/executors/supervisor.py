"""Runs one task attempt on this machine and records how it ended.

The local executor has `pai.executors.launcher` fork a supervisor per task, in a session of its
own, and hand it the task's script. The supervisor outlives the control plane, so a
restart of the platform leaves running tasks alone; the executor finds them again through the
task directory (see `pai.executors.taskfiles`).

What it does for the task, in order: checks that the task's ports are free on its node address
(busy: 253, as OpenPAI's port checker), mounts the task's storages in a mount namespace of the
task's own (`pai.executors.mounts`; a failure ends the task with -120 or -200), runs the script
with bash in the working directory with the task's environment, copies stdout and stderr into
capped log files, watches the resident memory of the task's whole process tree, ends the tree on
request (SIGTERM, then SIGKILL after the grace period) or on exceeding memoryMB (SIGKILL, code
-1200), and finally classifies the exit with the exit spec and writes result.json atomically.

The supervisor makes itself a child subreaper, so processes the task orphans (daemonised,
`setsid`) stay its descendants: none of them survives the task. Memory is enforced by watching
RSS rather than by RLIMIT_AS, because address-space limits break programs that reserve large
virtual ranges without using them (CUDA, JVMs, allocators).

The script reaches the supervisor in memory and bash through a pipe, never through a file or the
command line, because it carries the job's secrets.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

import psutil

from pai.executors.base import LogStream, TaskResult
from pai.executors.logfiles import READ_CHUNK, CappedLogWriter, read_log
from pai.executors.mounts import MountFailed, mount_command, read_report
from pai.executors.proctree import child_pids, tree_resident_bytes
from pai.executors.taskfiles import (
    MIB,
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

ISOLATION = "host"
RUNTIME_LOG_TAIL_BYTES = 64 * 1024
KILL_RETRY_INTERVAL = 0.05
KILL_TIMEOUT = 30.0  # a process in uninterruptible sleep ignores SIGKILL until it wakes
PUMP_JOIN_TIMEOUT = 5.0
_PR_SET_CHILD_SUBREAPER = 36


class _Ending(Enum):
    EXITED = "exited"
    STOPPED = "stopped"
    OUT_OF_MEMORY = "out of memory"
    LIFELINE_LOST = "lifeline lost"


class Supervisor:
    """Supervises one task attempt from start to result."""

    def __init__(self, files: TaskFiles, record: LaunchRecord, script: bytes) -> None:
        self._files = files
        self._record = record
        self._config = record.config
        self._script = script
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
        self._note(
            f"task {record.key}: role {record.role} index {record.index}, job {record.job} "
            f"attempt {record.job_attempt}, task attempt {record.task_attempt}, "
            f"node {record.node} ({record.address})"
        )
        self._note(
            f"docker image {record.docker_image or '(none)'} is recorded only: PAI runs the "
            "task's commands directly on the node's host"
        )
        try:
            classification = self._run_task()
        except Exception as exc:  # whatever breaks, the task must still get a result
            self._note("the runtime failed:\n" + traceback.format_exc())
            self._kill_tree(None)
            code = (
                ExitCode.POD_EXTERNAL_DELETED
                if self._started_at
                else ExitCode.POD_CREATION_TRANSIENT_ERROR
            )
            classification = self._spec().for_code(
                code, diagnostics=(f"the task's runtime failed: {exc!r}",)
            )
        result = TaskResult(classification, self._started_at, utc_now(), ISOLATION)
        self._note(f"finished: exit code {result.exit_code} ({classification.phrase})")
        self._files.write_result(result)
        self._runtime_log.close()
        return 0

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
        if self._stop_signal is not None:
            return self._stopped_classification(None)
        writers = self._open_logs()
        try:
            try:
                process = self._start_command()
            except MountFailed as failed:
                return self._mount_failed_classification(failed)
            self._started_at = utc_now()
            identity = ProcessIdentity.of(process.pid) or ProcessIdentity(process.pid, 0.0)
            self._files.write_started(StartedCommand(identity, self._started_at))
            self._note(f"command started: pid {process.pid}")
            pumps = self._start_pumps(process, writers)
            ending = self._watch(process)
            status = _exit_status(process.wait())
            self._kill_tree(process)
            for pump in pumps:
                pump.join(PUMP_JOIN_TIMEOUT)
        finally:
            for writer in writers.values():
                writer.close()
        self._note(f"command exited with status {status}")
        if ending is _Ending.STOPPED:
            return self._stopped_classification(status)
        if ending is _Ending.OUT_OF_MEMORY:
            return self._out_of_memory_classification(status)
        if ending is _Ending.LIFELINE_LOST:
            return self._lifeline_lost_classification(status)
        return self._spec().classify(
            status,
            self._read_log(LogStream.ALL, self._config.classify_tail_bytes),
            self._read_log(LogStream.RUNTIME, RUNTIME_LOG_TAIL_BYTES),
        )

    def _start_command(self) -> subprocess.Popen[bytes]:
        env = {name: os.environ[name] for name in self._config.inherit_env if name in os.environ}
        env.update(self._record.env)
        bash = shutil.which("bash", path=env.get("PATH")) or "/bin/bash"
        read_fd, write_fd = os.pipe()
        command, report_fd, mounting_fd = [bash, f"/dev/fd/{read_fd}"], None, None
        if self._record.mounts:
            report_fd, mounting_fd = os.pipe()
            prefix, env = mount_command(self._record.mounts, mounting_fd, env)
            command = prefix + command
        try:
            process = subprocess.Popen(
                command,
                cwd=self._record.working_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(read_fd,) if mounting_fd is None else (read_fd, mounting_fd),
                process_group=0,
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
            if mounting_fd is not None:
                os.close(mounting_fd)
        failed = read_report(report_fd) if report_fd is not None else None
        if failed is not None:
            os.close(write_fd)
            process.communicate()
            raise failed
        # bash reads the script through its own descriptor; closing the inherited one keeps the
        # task's programs from reading (or holding open) the script pipe.
        script = f"exec {read_fd}<&-\n".encode() + self._script
        threading.Thread(target=_feed, args=(write_fd, script), daemon=True).start()
        return process

    def _open_logs(self) -> dict[LogStream, CappedLogWriter]:
        cap = self._config.log_cap_bytes
        return {
            stream: CappedLogWriter(self._record.log_dir / stream, cap)
            for stream in (LogStream.STDOUT, LogStream.STDERR, LogStream.ALL)
        }

    def _start_pumps(
        self, process: subprocess.Popen[bytes], writers: dict[LogStream, CappedLogWriter]
    ) -> list[threading.Thread]:
        pumps = []
        for pipe, stream in (
            (process.stdout, LogStream.STDOUT),
            (process.stderr, LogStream.STDERR),
        ):
            assert pipe is not None
            pump = threading.Thread(
                target=_pump, args=(pipe, writers[stream], writers[LogStream.ALL]), daemon=True
            )
            pump.start()
            pumps.append(pump)
        return pumps

    def _watch(self, process: subprocess.Popen[bytes]) -> _Ending:
        """Wait for the command to end by itself, by a stop request, or by using too much
        memory (then killed at once, as the kernel's OOM killer would)."""
        limit = self._record.memory_mb * MIB if self._record.memory_mb else None
        while process.poll() is None:
            if self._stop_signal is not None:
                self._terminate(process)
                return _Ending.STOPPED
            if self._lifeline_lost():
                self._note("the node's engine process ended: stopping the task")
                self._terminate(process)
                return _Ending.LIFELINE_LOST
            if limit is not None:
                resident = tree_resident_bytes(os.getpid())
                if resident > limit:
                    self._resident_at_kill = resident
                    self._note(
                        f"memory {resident // MIB} MB exceeds memoryMB {self._record.memory_mb}: "
                        "killing the task"
                    )
                    self._kill_tree(process)
                    return _Ending.OUT_OF_MEMORY
            _reap_orphans(process.pid)
            time.sleep(self._config.poll_interval)
        return _Ending.EXITED

    def _terminate(self, process: subprocess.Popen[bytes]) -> None:
        """SIGTERM the whole tree, then SIGKILL whatever is left after the grace period."""
        self._note(f"stopping: SIGTERM, SIGKILL after {self._config.stop_grace_seconds:g}s")
        _signal_tree(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self._config.stop_grace_seconds
        while time.monotonic() < deadline:
            process.poll()
            _reap_orphans(process.pid)
            if not _live(_descendants()):
                break
            time.sleep(KILL_RETRY_INTERVAL)
        self._kill_tree(process)

    def _kill_tree(self, process: subprocess.Popen[bytes] | None) -> None:
        """SIGKILL every process of the task until none is left, then reap them."""
        # Once the leader is reaped its pid (the group id) may be reused; the subreaper walk
        # below still finds every process the task left behind.
        group = process.pid if process is not None and process.returncode is None else None
        deadline = time.monotonic() + KILL_TIMEOUT
        while True:
            if group is not None:
                _signal_group(group, signal.SIGKILL)
            remaining = _live(_descendants())
            if not remaining:
                break
            if time.monotonic() > deadline:
                pids = sorted(child.pid for child in remaining)
                self._note(f"processes {pids} outlived SIGKILL for {KILL_TIMEOUT:g}s; left behind")
                break
            for child in remaining:
                _send(child, signal.SIGKILL)
            time.sleep(KILL_RETRY_INTERVAL)
        if process is not None:
            process.wait()
        _reap_orphans(None)

    def _stopped_classification(self, status: int | None) -> Classification:
        reason = self._files.kill_reason()
        if reason is not None:
            message = f"stopped by the platform: {reason.name.lower().replace('_', ' ')}"
            code = reason.exit_code
        else:
            name = signal.Signals(self._stop_signal or signal.SIGTERM).name
            message = f"the task's supervisor received {name} from outside the platform"
            code = ExitCode.POD_EXTERNAL_DELETED
        self._note(message)
        return self._spec().for_code(code, origin_exit_code=status, diagnostics=(message,))

    def _mount_failed_classification(self, failed: MountFailed) -> Classification:
        message = f"the task's storages cannot be mounted: {failed}"
        self._note(message)
        code = (
            ExitCode.POD_CREATION_TRANSIENT_ERROR
            if failed.transient
            else ExitCode.POD_CREATION_PERMANENT_ERROR
        )
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
        message = (
            f"the task used {self._resident_at_kill // MIB} MB of memory, more than its "
            f"memoryMB of {self._record.memory_mb}, and was killed"
        )
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
        self._runtime_log.write(f"{utc_now().isoformat(timespec='milliseconds')} [pai] {message}\n")

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop_signal = signum


def _exit_status(returncode: int) -> int:
    """A shell-style exit status: 128 + N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _feed(fd: int, data: bytes) -> None:
    try:
        with open(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass  # bash ended before reading the whole script


def _pump(pipe: IO[bytes], own: CappedLogWriter, combined: CappedLogWriter) -> None:
    fd = pipe.fileno()
    while chunk := os.read(fd, READ_CHUNK):
        own.write(chunk)
        combined.write(chunk)
    pipe.close()


def _become_child_subreaper() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def _live(processes: Sequence[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def _send(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        process.send_signal(signum)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _signal_tree(pgid: int, signum: int) -> None:
    _signal_group(pgid, signum)
    for process in _descendants():
        _send(process, signum)


def _reap_orphans(keep: int | None) -> None:
    """Collect exited children other than `keep` (orphans re-parented to this subreaper)."""
    for child in child_pids(os.getpid()):
        if child != keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, os.WNOHANG)


def supervise(files: TaskFiles, script: bytes) -> int:
    """Run the task recorded in `files` with `script`; the process's exit code. The caller
    (`pai.executors.launcher`) has made this process a session of its own and recorded it."""
    record = files.launch()
    if record is None:
        print(f"{files.directory}: no launch record", file=sys.stderr)
        return 2
    if record.config.detach:
        _detach(files)
    return Supervisor(files, record, script).run()


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
