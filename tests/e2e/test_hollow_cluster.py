"""`pai up --engine hollow`: the real platform against 50 emulated nodes, driven through its
REST API as users drive a real cluster. Tasks run nothing; they last as their `sleep` says and
end with their `exit` code, and silent nodes have their tasks retried elsewhere."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from e2e.pai_process import PaiUp
from pai.runtime.classification import ExitCode
from pai.sdk import Client
from pai.sdk.job_models import JobDetail

T = TypeVar("T")

NODES = 50
WAIT_SECONDS = 30.0


def hollow_job(
    name: str, command: str, *, instances: int = 1, gpus: int = 1, extras: str = ""
) -> str:
    return (
        f"protocolVersion: 2\nname: {name}\ntype: job\n"
        "prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]\n"
        "taskRoles:\n  main:\n"
        f"    instances: {instances}\n    dockerImage: image\n"
        f"    resourcePerInstance: {{cpu: {gpus or 1}, memoryMB: 1024, gpu: {gpus}}}\n"
        f"    commands:\n      - {command}\n"
        f"extras: {{podGracefulDeletionTimeoutSec: 0{extras}}}\n"
    )


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = WAIT_SECONDS) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def start_hollow(home: Path, *options: str) -> PaiUp:
    platform = PaiUp(home, None, {"PAI_RAY_NODE_TIMEOUT": "1"})
    platform.start("--engine", "hollow", "--hollow-nodes", str(NODES), *options)
    return platform


@pytest.fixture(scope="module")
def hollow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    platform = start_hollow(tmp_path_factory.mktemp("hollow") / "home")
    try:
        yield platform.client()
    finally:
        platform.stop()


def test_the_cluster_is_the_hollow_nodes_in_the_default_vc(hollow: Client) -> None:
    nodes = hollow.nodes()
    assert len(nodes) == NODES
    addresses = {node.name: node.address for node in nodes}
    assert addresses["hollow-00001"] == "10.64.0.1" and addresses["hollow-00021"] == "10.64.1.1"
    assert all(node.engine_state == "alive" and node.gpus.total == 8 for node in nodes)
    default = hollow.virtual_clusters()["default"]
    assert list(hollow.virtual_clusters()) == ["default"] and default.guaranteed_gpus == 8 * NODES


def test_a_task_fails_with_its_exit_code_after_its_sleep(hollow: Client) -> None:
    submitted = time.monotonic()
    hollow.submit(hollow_job("exit-three", "sleep 2; exit 3"))
    running = wait_until("RUNNING", lambda: hollow.job("exit-three").state == "RUNNING")
    assert running
    job = hollow.wait("exit-three", timeout=WAIT_SECONDS, poll=0.2)
    took = time.monotonic() - submitted
    assert job.state == "FAILED" and 2 <= took < 6
    (_, task) = job.tasks()[0]
    assert task.isolation == "hollow"
    assert task.container_exit_code == ExitCode.RUNTIME_UNKNOWN_FAILED
    runtime_log = hollow.logs("exit-three", "main", stream="runtime")
    assert "runs for 2 s, then exits with 3" in runtime_log
    assert "its command exited with 3" in runtime_log


def test_a_gang_of_whole_nodes_places_on_as_many_hosts_and_stops(hollow: Client) -> None:
    hollow.submit(hollow_job("gang", "sleep infinity", instances=4, gpus=8))
    job = wait_until(
        "the gang running",
        lambda: (
            (found := hollow.job("gang")).state == "RUNNING"
            and all(task.task_state == "RUNNING" for _, task in found.tasks())
            and found
        ),
    )
    hosts = [task.container_node_name for _, task in job.tasks()]
    assert len(set(hosts)) == 4 and all(str(host).startswith("hollow-") for host in hosts)
    assert all(task.container_gpus for _, task in job.tasks())
    hollow.stop("gang")
    stopped = hollow.wait("gang", timeout=WAIT_SECONDS, poll=0.2)
    assert stopped.state == "STOPPED"
    assert {task.container_exit_code for _, task in stopped.tasks()} == {
        ExitCode.STOP_FRAMEWORK_REQUESTED
    }


def test_a_higher_priority_job_preempts_a_task_of_a_full_cluster(hollow: Client) -> None:
    every_node = ", gangAllocation: false"
    hollow.submit(hollow_job("filler", "sleep 1h", instances=NODES, gpus=8, extras=every_node))
    wait_until(
        "the cluster full",
        lambda: all(task.task_state == "RUNNING" for _, task in hollow.job("filler").tasks()),
    )
    urgent = ", hivedScheduler: {jobPriorityClass: prod}"
    hollow.submit(hollow_job("urgent", "sleep 1h", gpus=8, extras=urgent))
    job = wait_until(
        "the urgent job running",
        lambda: (found := hollow.job("urgent")).state == "RUNNING" and found,
    )
    (_, task) = job.tasks()[0]
    filler = hollow.job("filler").tasks()
    assert sum(t.task_state == "RUNNING" for _, t in filler) == NODES - 1
    displaced = next(index for index, (_, t) in enumerate(filler) if t.task_state != "RUNNING")
    attempts = hollow.task_attempts("filler", "main", displaced).attempts
    assert attempts[0].container_node_name == task.container_node_name
    assert attempts[0].container_exit_code == ExitCode.POD_EXTERNAL_DELETED
    for name in ("urgent", "filler"):
        hollow.stop(name)
        assert hollow.wait(name, timeout=WAIT_SECONDS, poll=0.2).state == "STOPPED"


@pytest.mark.slow
def test_a_job_that_loses_a_silent_node_runs_again_elsewhere(tmp_path: Path) -> None:
    # Every 5 s, half of the nodes go silent for 5 s: a job on 10 nodes soon loses one.
    platform = start_hollow(tmp_path / "home", "--hollow-loss", "0.5", "--hollow-loss-every", "5")
    try:
        client = platform.client()
        client.submit(hollow_job("survivor", "sleep infinity", instances=10, gpus=8))

        def running_again() -> JobDetail | None:
            job = client.job("survivor")
            again = job.job_status.retries >= 1 and job.state == "RUNNING"
            return job if again and all(t.task_state == "RUNNING" for _, t in job.tasks()) else None

        job = wait_until("the job running again", running_again, timeout=40)
        lost = client.job_attempt("survivor", 0)
        retry = client.job_attempt("survivor", 1)
    finally:
        platform.stop()
    assert job.job_status.retry_details.platform >= 1
    assert lost.job_status.app_exit_code == ExitCode.POD_NODE_LOST
    diagnostics = lost.job_status.app_exit_diagnostics or ""
    silent = re.search(r"node (hollow-\d+) was unreachable since", diagnostics)
    assert silent is not None, diagnostics
    # The retry started while that node was silent: elsewhere.
    retried_on = {task.container_node_name for _, task in retry.tasks()}
    assert len(retried_on) == 10 and None not in retried_on
    assert silent.group(1) not in retried_on
