"""A node whose container runtime cannot start containers: it checks the runtime with a
trivial container, takes no tasks while that fails (saying why in the runtime's own words),
counts the tasks that met the failure as the platform's, and takes tasks again once it works.

The broken runtime is real podman configured with an OCI runtime that fails every container
(`/bin/false`), as a machine whose packaged runtime cannot run containers there is."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from container_images import RuntimeConfiguration
from pai.executors.base import ExecutorError, NodeCondition
from pai.executors.isolation.policy import IsolationPolicy
from pai.executors.local import LocalExecutor
from pai.executors.sandboxes.containers import ContainerSandbox
from pai.runtime.classification import FailureType

if TYPE_CHECKING:
    from conftest import Harness

RECHECK_SECONDS = 0.5


@pytest.fixture
def runtime_configuration(
    container_sandbox: ContainerSandbox,
    sandbox_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RuntimeConfiguration:
    configuration = RuntimeConfiguration(container_sandbox, tmp_path / "containers.conf")
    configuration.works()
    monkeypatch.setenv("CONTAINERS_CONF", str(configuration.path))
    return configuration


def on_the_node(containers: Harness) -> LocalExecutor:
    """The harness's executor as a node of one cluster-file node, `node1`, that checks a
    failing runtime again every RECHECK_SECONDS."""
    containers.executor = LocalExecutor(
        containers.root / "state",
        config=replace(containers.config, isolation=IsolationPolicy("container")),
        liveness_interval=0.2,
        nodes=("node1",),
        runtime_recheck_seconds=RECHECK_SECONDS,
    )
    return containers.executor


def wait_ready(executor: LocalExecutor, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while executor.node_states():
        assert time.monotonic() < deadline, executor.node_states()
        time.sleep(0.1)


def test_a_node_whose_runtime_cannot_start_a_container_takes_no_tasks_until_it_can(
    containers: Harness, runtime_configuration: RuntimeConfiguration
) -> None:
    runtime_configuration.fails()
    executor = on_the_node(containers)

    (state,) = executor.node_states().values()
    assert state.condition is NodeCondition.BAD
    assert "cannot start a container: container create failed" in state.message
    assert "cannot start a container" in (executor.node_isolation.describe())
    with pytest.raises(ExecutorError, match="cannot start a container"):
        containers.launch("refused", "echo never")

    runtime_configuration.works()
    wait_ready(executor)
    result = containers.run("runs", "echo ran")
    assert result.exit_code == 0


def test_a_task_whose_container_the_runtime_cannot_start_is_retried_as_the_nodes_failure(
    containers: Harness, runtime_configuration: RuntimeConfiguration
) -> None:
    executor = on_the_node(containers)
    assert executor.node_states() == {}  # it worked when the node started
    containers.run("pulls", "true")  # the image is on the node: only the start can fail
    runtime_configuration.fails()

    result = containers.run("met-it", "echo never")

    verdict = result.classification
    assert verdict.code == -1006 and verdict.type is FailureType.PLATFORM_FAILURE
    assert verdict.transient  # retried, and not counted against the job's own retries
    assert "cannot start a container (container create failed" in verdict.diagnostics[0]
    (state,) = executor.node_states().values()
    assert state.condition is NodeCondition.BAD
    runtime_configuration.works()
    wait_ready(executor)
