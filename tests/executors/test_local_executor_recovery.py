"""Tasks outlive the control plane; a new executor finds them, and notices lost supervisors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from pai.executors.base import KillReason, LogStream, TaskEventKind, TaskPhase
from pai.executors.node.taskfiles import TaskFiles

if TYPE_CHECKING:
    from conftest import Harness

# Waits for the test to drop a file into its working directory: no timing guesses.
WAIT_FOR_GO = "echo waiting\nwhile [ ! -e go ]; do sleep 0.05; done\necho finished\n"

CONTROL_PLANE = """
import sys, time
from pathlib import Path
from pai.executors.base import TaskLaunch
from pai.executors.local import LocalExecutor
from pai.executors.node.taskfiles import SupervisorConfig

root = Path(sys.argv[1])
executor = LocalExecutor(root / "state", config=SupervisorConfig(poll_interval=0.05))
executor.launch(TaskLaunch(
    key="survivor", job="alice~job", role="worker", index=0, job_attempt=0, task_attempt=0,
    node="node1", address="127.0.0.1", script=sys.stdin.read(), env={},
    working_dir=root / "work" / "survivor", log_dir=root / "logs" / "survivor",
))
print("launched", flush=True)
time.sleep(600)
"""


def test_a_task_survives_its_control_plane_and_is_recovered(harness: Harness) -> None:
    control_plane = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CONTROL_PLANE), str(harness.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert control_plane.stdin is not None and control_plane.stdout is not None
    control_plane.stdin.write(WAIT_FOR_GO)
    control_plane.stdin.close()
    assert control_plane.stdout.readline() == "launched\n"
    task_files = TaskFiles(harness.root / "state" / "tasks" / "survivor")
    harness.wait_until(lambda: task_files.started() is not None)

    control_plane.send_signal(signal.SIGKILL)
    control_plane.wait()
    restarted = harness.new_executor()
    [status] = restarted.recover()

    assert (status.key, status.phase, status.role) == ("survivor", TaskPhase.RUNNING, "worker")
    assert status.result is None
    harness.executor = restarted
    (harness.root / "work" / "survivor" / "go").touch()
    result = harness.wait_finished("survivor")
    assert result.exit_code == 0
    assert restarted.logs("survivor", LogStream.STDOUT) == b"waiting\nfinished\n"
    # Once finished, a further restart reports it finished with the same result.
    [again] = harness.new_executor().recover()
    assert (again.phase, again.result) == (TaskPhase.FINISHED, result)


def test_a_killed_supervisor_is_noticed_and_its_task_ended(harness: Harness) -> None:
    marker = "3005.5"
    harness.launch("orphaned", f"sleep {marker}")
    harness.wait_for("orphaned", TaskEventKind.STARTED)
    supervisor = TaskFiles(harness.root / "state" / "tasks" / "orphaned").supervisor()
    assert supervisor is not None

    os.kill(supervisor.pid, signal.SIGKILL)
    result = harness.wait_finished("orphaned")

    assert (result.exit_code, result.classification.phrase) == (-101, "PodExternalDeleted")
    assert result.classification.transient
    assert f"pid {supervisor.pid}" in result.classification.diagnostics[0]
    assert harness.processes_with(marker) == []


def test_recover_finds_a_lost_supervisor_after_a_restart(harness: Harness) -> None:
    marker = "3006.5"
    harness.launch("lost", f"sleep {marker}")
    harness.launch("fine", WAIT_FOR_GO)
    harness.wait_for("lost", TaskEventKind.STARTED)
    harness.wait_for("fine", TaskEventKind.STARTED)
    supervisor = TaskFiles(harness.root / "state" / "tasks" / "lost").supervisor()
    assert supervisor is not None
    os.kill(supervisor.pid, signal.SIGKILL)
    harness.wait_until(lambda: not supervisor.alive())

    statuses = {status.key: status for status in harness.new_executor().recover()}

    assert statuses["fine"].phase is TaskPhase.RUNNING
    lost = statuses["lost"]
    assert lost.phase is TaskPhase.FINISHED and lost.result is not None
    assert lost.result.exit_code == -101
    assert harness.processes_with(marker) == []


def test_recover_after_a_machine_crash_that_left_the_process_records_empty(
    harness: Harness,
) -> None:
    """The records of processes are not synced to disk: after a crash they may be empty."""
    marker = "3008.5"
    harness.launch("crashed", f"sleep {marker}")
    harness.wait_for("crashed", TaskEventKind.STARTED)
    task_files = TaskFiles(harness.root / "state" / "tasks" / "crashed")
    supervisor = task_files.supervisor()
    assert supervisor is not None
    for process in [supervisor.process(), *harness.processes_with(marker)]:
        assert process is not None
        process.kill()  # the machine went down with every process
    harness.wait_until(lambda: not supervisor.alive() and not harness.processes_with(marker))
    for name in ("supervisor.json", "started.json"):
        task_files.path(name).write_bytes(b"")

    [status] = harness.new_executor().recover()

    assert status.phase is TaskPhase.FINISHED and status.result is not None
    assert status.result.exit_code == -101
    assert "never recorded" in status.result.classification.diagnostics[0]


def test_killing_a_task_whose_supervisor_is_gone_still_ends_it(harness: Harness) -> None:
    marker = "3007.5"
    harness.launch("headless", f"sleep {marker}")
    harness.wait_for("headless", TaskEventKind.STARTED)
    supervisor = TaskFiles(harness.root / "state" / "tasks" / "headless").supervisor()
    assert supervisor is not None
    os.kill(supervisor.pid, signal.SIGKILL)
    harness.wait_until(lambda: not supervisor.alive())

    harness.executor.kill("headless", KillReason.STOP_REQUESTED)
    result = harness.wait_finished("headless")

    assert result.exit_code == -210
    assert harness.processes_with(marker) == []
