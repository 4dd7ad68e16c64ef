"""An attempt stopped or given up before its command started never starts it.

The platform may retry such an attempt at once, on the same node: a command that started
anyway would run beside its retry. Two ways a command could start late: its supervisor was
still waiting for the task's SSH server and barrier when the stop came, or the stop (or the
node executor's give-up) came while the supervisor was detaching from its starter, before it
had recorded itself, so the signal reached only the starter.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pai.executors.base import KillReason, TaskEventKind, TaskLaunch, TaskResult
from pai.executors.node.taskfiles import LaunchRecord, TaskFiles, utc_now
from pai.runtime.classification import ExitCode
from pai.runtime.exitspec import builtin_exit_spec
from pai.runtime.sshkeys import job_ssh_keys

if TYPE_CHECKING:
    from conftest import Harness

# Ignores SIGTERM, as a user's command may: once started, it would surely leave its mark.
MARKS_ITS_START = "trap '' TERM\ntouch started-here\nsleep 600\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def listening(port: int) -> Iterator[None]:
    with socket.create_server(("127.0.0.1", port)):
        yield


def ssh_task(harness: Harness, key: str, peer_port: int) -> TaskLaunch:
    """A task with the ssh plugin whose barrier waits for a peer's SSH port, `peer_port`."""
    keys = job_ssh_keys(lambda purpose: os.urandom(32), 1)
    ssh_port = free_port()
    work = harness.root / "work" / key
    env = {
        "PAI_CONTAINER_HOST_IP": "127.0.0.1",
        "PAI_CONTAINER_SSH_PORT": str(ssh_port),
        "PAI_WORK_DIR": str(work),
        "PAI_TASK_ROLE_LIST": "worker,peer",
        "PAI_TASK_ROLE_TASK_COUNT_worker": "1",
        "PAI_HOST_IP_worker_0": "127.0.0.1",
        "PAI_PORT_LIST_worker_0_ssh": str(ssh_port),
        "PAI_TASK_ROLE_TASK_COUNT_peer": "1",
        "PAI_HOST_IP_peer_0": "127.0.0.1",
        "PAI_PORT_LIST_peer_0_ssh": str(peer_port),
    }
    server = {
        "keys": {
            "hostKey": keys.host.private,
            "hostPublicKey": keys.host.public,
            "authorizedKeys": [],
        },
        "barrier_seconds": 120,
    }
    return harness.task(
        key, MARKS_ITS_START, env=env, working_dir=work, ssh_server=json.dumps(server)
    )


def test_a_stop_during_the_ssh_barrier_keeps_the_command_from_starting(harness: Harness) -> None:
    peer_port = free_port()
    task = ssh_task(harness, "interactive", peer_port)
    harness.executor.launch(task)
    # Its SSH server is up and it waits for the peer's: reported running, command not started.
    harness.wait_for("interactive", TaskEventKind.STARTED)

    harness.executor.kill("interactive", KillReason.STOP_REQUESTED)
    with listening(peer_port):  # the barrier passes just after the stop
        result = harness.wait_finished("interactive")

    assert result.exit_code == ExitCode.STOP_FRAMEWORK_REQUESTED
    assert not (task.working_dir / "started-here").exists()
    assert not harness.processes_with(str(task.working_dir))


SUPERVISE = """
import sys
from pathlib import Path
from pai.executors.node.supervisor import supervise
from pai.executors.node.taskfiles import TaskFiles

sys.exit(supervise(TaskFiles(Path(sys.argv[1])), sys.stdin.buffer.read()))
"""


def supervise(files: TaskFiles) -> None:
    """Run the attempt's supervisor as its launcher does, to its end."""
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SUPERVISE), str(files.directory)],
        input=MARKS_ITS_START.encode(),
        check=True,
        timeout=60,
    )


def recorded_attempt(harness: Harness, key: str) -> tuple[TaskLaunch, TaskFiles]:
    """An attempt as the executor records it just before its supervisor starts."""
    task = harness.task(key, MARKS_ITS_START)
    for directory in (task.working_dir, task.log_dir):
        directory.mkdir(parents=True)
    files = TaskFiles(harness.root / "state" / "tasks" / key)
    files.directory.mkdir(parents=True)
    record = LaunchRecord.of(task, harness.config, utc_now(), isolation="host", task_user=None)
    files.write_launch(record)
    return task, files


def test_a_stop_that_reached_only_the_supervisors_starter_is_obeyed(harness: Harness) -> None:
    task, files = recorded_attempt(harness, "stopped-early")
    files.write_kill_reason(KillReason.FENCED)

    supervise(files)

    result = files.result()
    assert result is not None and result.exit_code == ExitCode.POD_NODE_LOST
    assert not (task.working_dir / "started-here").exists()


def test_an_attempt_given_up_before_its_supervisor_ran_is_not_started(harness: Harness) -> None:
    task, files = recorded_attempt(harness, "given-up")
    lost = builtin_exit_spec().for_code(ExitCode.POD_EXTERNAL_DELETED)
    given_up = TaskResult(lost, None, utc_now(), "host")
    files.write_result(given_up)

    supervise(files)

    assert files.result() == given_up  # what the platform was told stays
    assert not (task.working_dir / "started-here").exists()
