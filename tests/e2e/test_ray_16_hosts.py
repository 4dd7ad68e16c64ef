"""PAI on a Ray cluster of 16 hosts: a gang that must span them all, and a host lost under it.

Each host is a small Ray node in a network namespace of its own (`pai.executors.sandboxes.
ray_gang`), declaring 4 GPUs the machine lacks; the cluster file names all 16. A gang of 64
one-GPU tasks fits only with 4 tasks on every host; each task reaches a task on another host
over TCP, found through PAI's variables alone. Then a host is stopped while the gang runs: as
docs/deploy.md says of a removed machine, PAI sees the node gone, the tasks end with -1001
(`PodNodeLost`), and the exit spec retries the job at no cost to its retry count; the retry
needs all 64 GPUs, so it waits until the host is back and runs on all 16 hosts again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from e2e.pai_process import PaiUp
from e2e.test_ray_cluster import ray_sandbox_root, restore, wait_until
from pai.executors.sandboxes.ray import RaySandbox
from pai.executors.sandboxes.ray_gang import (
    cluster_file,
    pai_settings,
    ring_job,
    ring_peer,
    small_hosts,
    wait_all_alive,
    wait_all_running,
)
from pai.sdk import Client

# With the other Ray tests, one cluster at a time: beside another, 16 hosts starting overload two
# cores. Starting them may take several minutes on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.timeout(900)]

HOSTS = 16
TASKS = 64
GANG = "ring"
WAIT = 180.0
NODE_TIMEOUT = 6.0
"""A lost host's tasks are given up this + the grace period + 2 s after it last answered."""
STARTS_AT_ONCE = 4
"""Workers started together: more miss `ray start`'s fixed 30 s deadline on 2 busy cores."""


@pytest.fixture(scope="module")
def sandbox(requirement: Callable[[bool, str], None]) -> Iterator[RaySandbox]:
    root = ray_sandbox_root(requirement, "pai-ray16-")
    started = time.monotonic()
    with RaySandbox(root, small_hosts(HOSTS), starts_at_once=STARTS_AT_ONCE) as cluster:
        print(f"\n{HOSTS} Ray hosts started in {time.monotonic() - started:.0f} s")
        yield cluster


@pytest.fixture(scope="module")
def platform(sandbox: RaySandbox) -> Iterator[PaiUp]:
    path = sandbox.root / "cluster.yaml"
    path.write_text(cluster_file(sandbox))
    settings = {**pai_settings(sandbox), "PAI_RAY_NODE_TIMEOUT": f"{NODE_TIMEOUT:g}"}
    # Joining 16 hosts' Ray cluster takes more than a minute when the rest of the suite runs.
    pai = PaiUp(sandbox.root / "home", path, settings, start_within=WAIT)
    pai.start()
    with pai.client() as client:
        wait_all_alive(client, HOSTS, WAIT)
    yield pai
    pai.stop()


@pytest.fixture(scope="module")
def gang(platform: PaiUp) -> Iterator[dict[int, str]]:
    """The 64-task gang, submitted and running; the hosts of its tasks by index."""
    with platform.client() as client:
        client.submit(ring_job(GANG, TASKS))
        submitted = time.monotonic()
        hosts = wait_all_running(client, GANG, TASKS, WAIT)
        print(f"\n{TASKS} tasks RUNNING {time.monotonic() - submitted:.1f} s after the submission")
        yield hosts
        client.stop(GANG)


@pytest.fixture
def client(platform: PaiUp) -> Iterator[Client]:
    with platform.client() as connected:
        yield connected


def reached_lines(client: Client, hosts: dict[int, str]) -> dict[int, str]:
    """Each task's line about the peer it reached (or failed to), by index; none yet: ''."""
    found = {}
    for index in hosts:
        log = client.logs(GANG, role="ring", index=index)
        found[index] = next((line for line in log.splitlines() if line.startswith("task ")), "")
    return found


def test_a_gang_of_64_spans_16_hosts_and_each_task_reaches_a_peer_on_another_host(
    sandbox: RaySandbox, client: Client, gang: dict[int, str]
) -> None:
    assert set(gang.values()) == {sandbox.worker_address(name) for name in sandbox.workers}
    assert all(list(gang.values()).count(host) == 4 for host in gang.values())
    wait_until(lambda: all(reached_lines(client, gang).values()), "every task's line", WAIT)

    lines = reached_lines(client, gang)
    for index, host in gang.items():
        peer = ring_peer(gang, index)
        assert gang[peer] != host
        assert lines[index] == f"task {index} on {host} reached task {peer} on {gang[peer]}"


def test_a_lost_host_ends_its_tasks_with_node_lost_and_the_gang_is_retried_for_free(
    sandbox: RaySandbox, client: Client, gang: dict[int, str]
) -> None:
    by_address = {node.address: node.name for node in client.nodes()}
    lost = by_address[gang[0]]

    stopped = time.monotonic()
    sandbox.stop_worker(lost)
    try:
        wait_until(lambda: client.job(GANG).job_status.retries == 1, "the gang retried", WAIT)
        print(f"\nthe gang retried {time.monotonic() - stopped:.1f} s after {lost} stopped")
        [node] = [node for node in client.nodes() if node.name == lost]
        waiting = client.job(GANG)
        attempts = client.job_attempts(GANG)
    finally:
        restore(sandbox, client, lost)
    hosts = wait_all_running(client, GANG, TASKS, WAIT)

    assert (node.engine_state, node.healthy) == ("gone", False)
    first = next(attempt for attempt in attempts if attempt.job_status.attempt_id == 0)
    assert first.job_status.app_exit_code == -1001
    # Not charged to the job (jobRetryCount 0 would have failed it): the platform's failure.
    assert (waiting.job_status.retries, waiting.job_status.retry_details.platform) == (1, 1)
    assert waiting.job_status.retry_details.user == 0
    # 64 GPUs are needed and 60 were left: the retry waited for the host to come back.
    assert waiting.state == "WAITING"
    assert len(set(hosts.values())) == HOSTS
    assert client.job(GANG).job_status.attempt_id == 1
