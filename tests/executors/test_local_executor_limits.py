"""Ending tasks: stops, memory limits, signals from outside, busy ports. Nothing may survive."""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

from pai.executors.base import KillReason, TaskEventKind
from pai.executors.node.taskfiles import TaskFiles

if TYPE_CHECKING:
    from conftest import Harness

PYTHON = sys.executable


def test_memory_limit_kills_the_task_with_openpai_oom_code(harness: Harness) -> None:
    allocate = "import time; hog = b'x' * (200 * 1024 * 1024); time.sleep(60)"

    result = harness.run("hog", f'echo allocating\n{PYTHON} -c "{allocate}"', memory_mb=50)

    verdict = result.classification
    assert (result.exit_code, verdict.phrase) == (-1200, "UserContainerDockerOOMKilled")
    assert verdict.permanent
    assert verdict.origin_exit_code == 137
    assert "more than its memoryMB of 50" in verdict.diagnostics[0]
    assert "allocating" in verdict.diagnostics


def test_stop_kills_the_whole_process_tree(harness: Harness) -> None:
    marker = "3001.25"  # an unusual sleep length names this test's processes
    script = (
        f"bash -c 'sleep {marker} & sleep {marker}' &\n"
        f"setsid sleep {marker} &\n"  # left its process group: still the task's
        f'{PYTHON} -c \'import subprocess; subprocess.run(["sleep", "{marker}"])\'\n'
    )
    harness.launch("stop-me", script)
    harness.wait_for("stop-me", TaskEventKind.STARTED)
    harness.wait_until(lambda: len(harness.processes_with(marker)) >= 4)

    harness.executor.kill("stop-me", KillReason.STOP_REQUESTED)
    result = harness.wait_finished("stop-me")

    assert (result.exit_code, result.classification.phrase) == (-210, "StopFrameworkRequested")
    assert harness.processes_with(marker) == []


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(harness: Harness) -> None:
    marker = "3002.5"
    harness.launch("stubborn", f"trap '' TERM\nsleep {marker}\n")
    harness.wait_until(lambda: harness.processes_with(marker) != [])

    harness.executor.kill("stubborn", KillReason.ATTEMPT_COMPLETED)
    result = harness.wait_finished("stubborn")

    assert (result.exit_code, result.classification.phrase) == (-220, "FrameworkAttemptCompletion")
    assert result.classification.origin_exit_code == 137
    assert harness.processes_with(marker) == []


def test_sigkill_of_the_users_process_from_outside_is_transient(harness: Harness) -> None:
    marker = "3003.5"
    harness.launch("shot", f"echo working\nsleep {marker}\n")
    harness.wait_until(lambda: harness.processes_with(marker) != [])

    harness.processes_with(marker)[0].send_signal(signal.SIGKILL)
    result = harness.wait_finished("shot")

    assert (result.exit_code, result.classification.phrase) == (137, "ContainerSigKillReceived")
    assert result.classification.transient


def test_killing_a_finished_task_changes_nothing(harness: Harness) -> None:
    before = harness.run("done-already", "exit 3")

    harness.executor.kill("done-already", KillReason.STOP_REQUESTED)

    assert TaskFiles(harness.root / "state" / "tasks" / "done-already").result() == before
    assert harness.executor.events() == []


def test_a_busy_port_fails_the_task_as_a_transient_port_conflict(harness: Harness) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]

        result = harness.run("port-task", "echo never runs", ports={"http": [port]})

    assert (result.exit_code, result.classification.phrase) == (253, "ContainerPortConflict")
    assert result.classification.transient
    assert str(port) in result.classification.diagnostics[0]
    assert result.started_at is None


def test_a_stop_signal_from_outside_the_platform_is_an_external_deletion(harness: Harness) -> None:
    marker = "3004.5"
    harness.launch("external", f"sleep {marker}")
    harness.wait_until(lambda: harness.processes_with(marker) != [])
    supervisor = TaskFiles(harness.root / "state" / "tasks" / "external").supervisor()
    assert supervisor is not None

    os.kill(supervisor.pid, signal.SIGTERM)
    result = harness.wait_finished("external")

    assert (result.exit_code, result.classification.phrase) == (-101, "PodExternalDeleted")
    assert result.classification.transient
    assert harness.processes_with(marker) == []


def test_a_stop_right_after_launch_ends_the_task_as_stopped(harness: Harness) -> None:
    marker = "3008.5"
    harness.launch("short-lived", f"sleep {marker}")

    harness.executor.kill("short-lived", KillReason.STOP_REQUESTED)
    result = harness.wait_finished("short-lived")

    assert result.exit_code == -210
    assert harness.processes_with(marker) == []
