"""Supervisors that leave their starter's process tree, and tasks that end with their node.

Under Ray a node's agent starts supervisors detached (Ray kills a worker's children when the
worker exits) and gives them the node's raylet as their lifeline: when it ends, the node has
left the cluster and its tasks must end too, with the retryable code of a lost node.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import psutil
import pytest

from pai.executors.base import LogStream, TaskEventKind
from pai.executors.node.taskfiles import ProcessIdentity, TaskFiles

if TYPE_CHECKING:
    from conftest import Harness


@pytest.fixture
def lifeline() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for the node's raylet."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def identity_of(process: subprocess.Popen[bytes]) -> ProcessIdentity:
    identity = ProcessIdentity.of(process.pid)
    assert identity is not None
    return identity


def test_a_detached_supervisor_is_not_a_child_of_the_executor(harness: Harness) -> None:
    harness.executor = harness.new_executor(detach=True)

    harness.launch("detached", "echo started\nsleep 0.5\necho done")
    harness.wait_for("detached", TaskEventKind.STARTED)
    supervisor = TaskFiles(harness.root / "state" / "tasks" / "detached").supervisor()
    assert supervisor is not None and supervisor.alive()
    children = {child.pid for child in psutil.Process().children(recursive=True)}
    assert supervisor.pid not in children
    assert os.getsid(supervisor.pid) == supervisor.pid  # a session of its own

    result = harness.wait_finished("detached")
    assert result.exit_code == 0
    assert harness.executor.logs("detached", LogStream.STDOUT) == b"started\ndone\n"


def test_a_task_ends_with_its_lifeline_as_a_lost_node(
    harness: Harness, lifeline: subprocess.Popen[bytes]
) -> None:
    marker = "3011.5"
    harness.executor = harness.new_executor(detach=True, lifeline=identity_of(lifeline))
    harness.launch("bound", f"sleep {marker}")
    harness.wait_for("bound", TaskEventKind.STARTED)

    lifeline.kill()
    lifeline.wait()
    result = harness.wait_finished("bound")

    assert (result.exit_code, result.classification.phrase) == (-1001, "PodNodeLost")
    assert result.classification.transient
    assert "the node left the cluster" in result.classification.diagnostics[0]
    assert harness.processes_with(marker) == []


def test_a_task_whose_lifeline_is_already_gone_never_starts(
    harness: Harness, lifeline: subprocess.Popen[bytes]
) -> None:
    gone = identity_of(lifeline)
    lifeline.kill()
    lifeline.wait()
    harness.executor = harness.new_executor(lifeline=gone)

    result = harness.run("late", "touch ran")

    assert result.exit_code == -1001
    assert result.started_at is None
    assert not (harness.root / "work" / "late" / "ran").exists()
