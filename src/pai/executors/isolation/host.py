"""A task run directly on its node: the script, with bash, as a child of its supervisor.

The supervisor is a child subreaper, so every process the task starts stays its descendant (the
daemonised ones too): the task is the supervisor's whole tree, and that tree is what is
signalled, killed and measured. The command runs in a process group of its own, in the working
directory, with the task's environment; it starts through `pai.executors.isolation.mounts` when
it needs a mount namespace (storages, or a task user whose view of PAI's home is hidden), which
then execs bash under the same pid.

When PAI runs as root and host tasks run as an unprivileged user, the user is dropped to in
that last step, after the namespace is made, so the task holds no privilege at all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

import psutil

from pai.cluster.cdispecs import host_nodes
from pai.executors.isolation.mounts import Mount, mount_command, read_report
from pai.executors.node.proctree import child_pids, tree_resident_bytes
from pai.executors.node.taskfiles import Exited, LaunchRecord, ProcessIdentity

KILL_RETRY_INTERVAL = 0.05
KILL_TIMEOUT = 30.0  # a process in uninterruptible sleep ignores SIGKILL until it wakes


def device_groups(kind: str, devices: Sequence[int]) -> list[int]:
    """The groups a task user needs to open the device nodes that the node's CDI specs list
    for its `devices` of `kind`: each node's group where it lets its group read and write
    (as `render` and `video` do for AMD's and Intel's GPUs). This is what PAI may hand over
    on the host: a group opens every node it owns, so tasks on the host share a node's
    devices of a kind (containers do not)."""
    groups = []
    for node in host_nodes(kind, [str(device) for device in devices]):
        try:
            status = node.stat()
        except OSError:
            continue
        if status.st_mode & 0o060 == 0o060:
            groups.append(status.st_gid)
    return sorted(set(groups))


class HostRun:
    """One host task from its start to its end (see the module docstring)."""

    isolation = "host"

    def __init__(self, record: LaunchRecord, inherited_env: Mapping[str, str]) -> None:
        self._record = record
        self._env = {**inherited_env, **record.env}
        if record.task_user is not None:
            user = record.task_user
            self._env.update(HOME=str(record.working_dir), USER=user.name, LOGNAME=user.name)
        self._process: subprocess.Popen[bytes] | None = None
        self._script: tuple[int, int] | None = None
        """The pipe bash reads its script from: the descriptor bash has it as, and ours."""

    @property
    def identity(self) -> ProcessIdentity:
        assert self._process is not None
        pid = self._process.pid
        return ProcessIdentity.of(pid) or ProcessIdentity(pid, 0.0)

    @property
    def env(self) -> dict[str, str]:
        """The task's environment."""
        return dict(self._env)

    @property
    def stdout(self) -> IO[bytes]:
        assert self._process is not None and self._process.stdout is not None
        return self._process.stdout

    @property
    def stderr(self) -> IO[bytes]:
        assert self._process is not None and self._process.stderr is not None
        return self._process.stderr

    def start(self) -> None:
        """Start bash, in the task's view of the node and as its user; it runs the script
        once given it (`feed`). Raises MountFailed when a mount cannot be made."""
        record, env = self._record, dict(self._env)
        bash = shutil.which("bash", path=env.get("PATH")) or "/bin/bash"
        read_fd, write_fd = os.pipe()
        user = record.task_user
        if user is not None:  # bash opens the pipe again by its /dev/fd path, as the user
            os.fchown(read_fd, user.uid, user.gid)
        command, report_fd, mounting_fd = [bash, f"/dev/fd/{read_fd}"], None, None
        mounts, hidden = self._mounts()
        if mounts or hidden or user:
            report_fd, mounting_fd = os.pipe()
            prefix, env = mount_command(
                mounts,
                mounting_fd,
                env,
                hide=hidden,
                user=(user.uid, user.gid) if user else None,
                groups=device_groups(record.device_kind, record.gpus) if user else (),
            )
            command = prefix + command
        try:
            self._process = subprocess.Popen(
                command,
                cwd=record.working_dir,
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
            self._process.communicate()
            raise failed
        self._script = (read_fd, write_fd)

    def feed(self, script: bytes) -> None:
        """Give bash its script (once)."""
        assert self._script is not None, "the script was given already"
        (read_fd, write_fd), self._script = self._script, None
        # bash reads the script through its own descriptor; closing the inherited one keeps the
        # task's programs from reading (or holding open) the script pipe.
        script = f"exec {read_fd}<&-\n".encode() + script
        threading.Thread(target=feed, args=(write_fd, script), daemon=True).start()

    def _mounts(self) -> tuple[Sequence[Mount], str | None]:
        """The storages, and for a task user its own directories in a view of the node where
        PAI's home is hidden."""
        record = self._record
        if record.task_user is None or record.hidden_root is None:
            return record.mounts, None
        own = [Mount(str(record.working_dir), str(record.working_dir))]
        if record.previous_working_dir is not None and record.previous_working_dir.is_dir():
            previous = str(record.previous_working_dir)
            own.append(Mount(previous, previous))
        return (*own, *record.mounts), record.hidden_root

    def running(self) -> bool:
        assert self._process is not None
        return self._process.poll() is None

    def finish(self) -> Exited:
        """The command's exit status, shell-style (128 + N for a process killed by signal N);
        a kill for memory is the supervisor's to say."""
        assert self._process is not None
        return Exited(exit_status(self._process.wait()), oom_killed=False)

    def resident_bytes(self) -> int:
        """Resident memory of the task's processes (the supervisor's tree)."""
        return tree_resident_bytes(os.getpid())

    def signal(self, signum: int) -> None:
        """`signum` to the task's process group and every other process it started."""
        assert self._process is not None
        if self._process.returncode is None:
            signal_group(self._process.pid, signum)
        for process in descendants():
            send(process, signum)

    def has_processes(self) -> bool:
        reap_orphans(self._process.pid if self._process else None)
        return bool(live(descendants()))

    def kill(self) -> list[int]:
        """SIGKILL every process of the task until none is left, then reap them; the pids of
        those that outlived it (stuck in the kernel) are returned."""
        process = self._process
        # Once the leader is reaped its pid (the group id) may be reused; the subreaper walk
        # below still finds every process the task left behind.
        group = process.pid if process is not None and process.returncode is None else None
        left = kill_descendants(group)
        if process is not None:
            process.wait()
        reap_orphans(None)
        return left

    def tick(self) -> None:
        """Collect the task's orphans that exited (they are re-parented to the supervisor)."""
        reap_orphans(self._process.pid if self._process else None)


def feed(fd: int, data: bytes) -> None:
    try:
        with open(fd, "wb") as pipe:
            pipe.write(data)
    except BrokenPipeError:
        pass  # the shell ended before reading the whole script


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def kill_descendants(group: int | None = None) -> list[int]:
    """SIGKILL the process group `group` (if any) and every descendant of this process, until
    none is left or KILL_TIMEOUT passes; the pids still there then."""
    deadline = time.monotonic() + KILL_TIMEOUT
    while True:
        if group is not None:
            signal_group(group, signal.SIGKILL)
        remaining = live(descendants())
        if not remaining:
            return []
        if time.monotonic() > deadline:
            return sorted(child.pid for child in remaining)
        for child in remaining:
            send(child, signal.SIGKILL)
        time.sleep(KILL_RETRY_INTERVAL)


def descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def live(processes: Sequence[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def send(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        process.send_signal(signum)


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def reap_orphans(keep: int | None) -> None:
    """Collect exited children other than `keep` (orphans re-parented to this subreaper)."""
    for child in child_pids(os.getpid()):
        if child != keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, os.WNOHANG)
