"""A local executor on a temporary state directory, and helpers to drive real tasks with it."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from pai.executors.base import TaskEvent, TaskEventKind, TaskLaunch, TaskResult
from pai.executors.isolation.images import RegistryAuth
from pai.executors.isolation.policy import IsolationPolicy
from pai.executors.local import LocalExecutor, kill_processes_under
from pai.executors.node.taskfiles import SupervisorConfig, TaskFiles
from pai.executors.sandboxes.containers import ContainerSandbox

WAIT_SECONDS = 30.0
FAST_CONFIG = SupervisorConfig(stop_grace_seconds=2.0, poll_interval=0.05)
LIVENESS_INTERVAL = 0.2


@dataclass
class Harness:
    """Launches tasks on a local executor and collects its events per task."""

    root: Path
    config: SupervisorConfig = FAST_CONFIG
    task_defaults: dict[str, Any] = field(default_factory=dict)
    """Fields every task gets unless a test says otherwise (an image, for containers)."""
    executor: LocalExecutor = field(init=False)
    events: dict[str, list[TaskEvent]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        self.executor = self.new_executor()

    def new_executor(self, state: str = "state", **config: Any) -> LocalExecutor:
        """An executor on `root/<state>`; a second one on the same state sees the same tasks."""
        return LocalExecutor(
            self.root / state,
            config=replace(self.config, **config),
            liveness_interval=LIVENESS_INTERVAL,
        )

    def task(self, key: str, script: str, **fields: Any) -> TaskLaunch:
        values: dict[str, Any] = {
            "key": key,
            "job": "alice~job",
            "role": "worker",
            "index": 0,
            "job_attempt": 0,
            "task_attempt": 0,
            "node": "node1",
            "address": "127.0.0.1",
            "script": script,
            "env": {},
            "working_dir": self.root / "work" / key,
            "log_dir": self.root / "logs" / key,
            "memory_mb": None,
            **self.task_defaults,
        }
        values.update(fields)
        return TaskLaunch(**values)

    def launch(self, key: str, script: str, **fields: Any) -> TaskLaunch:
        task = self.task(key, script, **fields)
        self.executor.launch(task)
        return task

    def poll(self) -> None:
        for event in self.executor.events():
            self.events[event.key].append(event)

    def wait_for(self, key: str, kind: TaskEventKind, timeout: float = WAIT_SECONDS) -> TaskEvent:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            for event in self.events[key]:
                if event.kind is kind:
                    return event
            time.sleep(0.05)
        raise AssertionError(f"{key}: no {kind} event within {timeout}s")

    def wait_finished(self, key: str, timeout: float = WAIT_SECONDS) -> TaskResult:
        result = self.wait_for(key, TaskEventKind.FINISHED, timeout).result
        assert result is not None
        return result

    def run(self, key: str, script: str, **fields: Any) -> TaskResult:
        self.launch(key, script, **fields)
        return self.wait_finished(key)

    def usage_while_busy(self, busy: str) -> dict[str, Any]:
        """Each task's usage over the first 1.5 s window in which task `busy` used more than
        40 % of a core: a loaded machine may give its loop little of a core for a while.
        Fails with every window's figure if none did within about 18 s."""
        self.executor.usage()  # the baseline
        seen = []
        for _ in range(12):
            time.sleep(1.5)
            usage = {task.key: task for task in self.executor.usage().tasks}
            seen.append(usage[busy].cpu_percent)
            if seen[-1] > 40:
                return usage
        raise AssertionError(f"{busy} never used 40 % of a core: {seen}")

    @staticmethod
    def processes_with(marker: str) -> list[psutil.Process]:
        """Live processes whose command line mentions `marker`."""
        found = []
        for process in psutil.process_iter(["cmdline", "status"]):
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in process.info["cmdline"] or ()):
                found.append(process)
        return found

    @staticmethod
    def wait_until(condition: Callable[[], object], timeout: float = WAIT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s")
            time.sleep(0.05)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    yield Harness(tmp_path)
    for state_dir in tmp_path.glob("state*"):
        kill_leftovers(state_dir)


@pytest.fixture
def containers(
    tmp_path: Path,
    sandbox_env: dict[str, str],
    container_sandbox: ContainerSandbox,
    busybox_image: str,
) -> Iterator[Harness]:
    """Tasks run in containers of the sandbox's busybox image, pulled with its password."""
    harness = Harness(
        tmp_path,
        config=replace(FAST_CONFIG, isolation=IsolationPolicy("container")),
        task_defaults={
            "docker_image": busybox_image,
            "image_auth": RegistryAuth("pai", container_sandbox.password),
        },
    )
    yield harness
    kill_processes_under(tmp_path)


def kill_leftovers(state_dir: Path) -> None:
    """Whatever a failed test left running: supervisors, and every process of their tasks."""
    tasks = state_dir / "tasks"
    for directory in tasks.iterdir() if tasks.exists() else ():
        files = TaskFiles(directory)
        identity, started = files.supervisor(), files.started()
        supervisor = identity.process() if identity else None
        try:
            doomed = [*supervisor.children(recursive=True), supervisor] if supervisor else []
        except psutil.NoSuchProcess:  # it has just ended by itself
            doomed = []
        if started is not None:
            doomed += [p for p in psutil.process_iter() if _group_of(p) == started.pgid]
        for process in doomed:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                continue


def _group_of(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None
