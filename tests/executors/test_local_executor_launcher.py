"""Supervisors forked by the executor's warm launcher: many at once, and a launcher that dies."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import psutil

from pai.executors.base import LogStream, TaskEventKind
from pai.executors.node.launcher import LAUNCHERS

if TYPE_CHECKING:
    from conftest import Harness


def launchers_of(harness: Harness) -> list[psutil.Process]:
    """The executor's launchers: the live children of this process that serve its state
    directory (the supervisors they fork share their command line but are not our children)."""
    wanted = f"pai.executors.node.launcher {harness.root / 'state'}"
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and wanted in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_tasks_launched_at_once_each_run_their_own_script(harness: Harness) -> None:
    keys = [f"together-{i}" for i in range(12)]
    with ThreadPoolExecutor(len(keys)) as pool:
        list(pool.map(lambda key: harness.launch(key, f"echo I am {key}"), keys))

    for key in keys:
        assert harness.wait_finished(key).exit_code == 0
        assert harness.executor.logs(key, LogStream.STDOUT) == f"I am {key}\n".encode()


def test_running_tasks_outlive_their_launchers_and_new_launchers_take_over(
    harness: Harness,
) -> None:
    wait_for_go = "while [ ! -e go ]; do sleep 0.05; done; echo finished"
    keys = [f"before-{i}" for i in range(LAUNCHERS)]  # one from each launcher
    for key in keys:
        harness.launch(key, wait_for_go)
    for key in keys:
        harness.wait_for(key, TaskEventKind.STARTED)
    first = launchers_of(harness)
    assert len(first) == LAUNCHERS

    for launcher in first:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
    after = [harness.run(f"after-{i}", "echo started by a new launcher") for i in range(LAUNCHERS)]
    for key in keys:
        (harness.root / "work" / key / "go").touch()

    assert [result.exit_code for result in after] == [0] * LAUNCHERS
    assert {p.pid for p in launchers_of(harness)}.isdisjoint(p.pid for p in first)
    for key in keys:
        assert harness.wait_finished(key).exit_code == 0
        assert harness.executor.logs(key, LogStream.STDOUT) == b"finished\n"


def test_the_launchers_end_with_their_executor(harness: Harness) -> None:
    harness.run("one", "true")
    launchers = launchers_of(harness)
    assert launchers

    del harness.executor  # its ends of the launchers' pipes close with it

    assert [launcher.wait(10) for launcher in launchers] == [0] * len(launchers)
