"""Supervisors forked by the executor's warm launcher: many at once, and a launcher that dies."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import psutil

from pai.executors.base import LogStream, TaskEventKind

if TYPE_CHECKING:
    from conftest import Harness


def launcher_of(harness: Harness) -> psutil.Process:
    """The executor's launcher: the live child of this process that serves its state directory
    (its supervisors, forked from it, share its command line but are not children of ours)."""
    wanted = f"pai.executors.launcher {harness.root / 'state'}"
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and wanted in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    [launcher] = found
    return launcher


def test_tasks_launched_at_once_each_run_their_own_script(harness: Harness) -> None:
    keys = [f"together-{i}" for i in range(12)]
    with ThreadPoolExecutor(len(keys)) as pool:
        list(pool.map(lambda key: harness.launch(key, f"echo I am {key}"), keys))

    for key in keys:
        assert harness.wait_finished(key).exit_code == 0
        assert harness.executor.logs(key, LogStream.STDOUT) == f"I am {key}\n".encode()


def test_a_running_task_outlives_its_launcher_and_a_new_launcher_takes_over(
    harness: Harness,
) -> None:
    harness.launch("before", "while [ ! -e go ]; do sleep 0.05; done; echo finished")
    harness.wait_for("before", TaskEventKind.STARTED)
    first = launcher_of(harness)

    first.send_signal(signal.SIGKILL)
    first.wait(10)
    after = harness.run("after", "echo started by a new launcher")
    (harness.root / "work" / "before" / "go").touch()

    assert after.exit_code == 0
    assert launcher_of(harness).pid != first.pid
    assert harness.wait_finished("before").exit_code == 0
    assert harness.executor.logs("before", LogStream.STDOUT) == b"finished\n"


def test_the_launcher_ends_with_its_executor(harness: Harness) -> None:
    harness.run("one", "true")
    launcher = launcher_of(harness)

    del harness.executor  # its end of the launcher's pipe closes with it

    assert launcher.wait(10) == 0
