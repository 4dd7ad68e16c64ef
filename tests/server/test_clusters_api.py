"""Virtual clusters, SKU types and nodes through a real platform on the four-node CPU cluster
(`default`: 3 nodes, `research`: 1 node; 4 CPU slots of 1 CPU and 1 GiB per node)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from server.harness import Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    """The accounts of conftest.py (admin, alice) live on the whole platform here."""
    return pai_platform


@pytest.fixture(scope="module")
def as_alice(pai_server: RunningServer, alice: Account) -> Iterator[httpx.Client]:
    with pai_server.client(alice.token) as client:
        yield client


@pytest.fixture(scope="module")
def as_admin(pai_server: RunningServer, admin: Account) -> Iterator[httpx.Client]:
    with pai_server.client(admin.token) as client:
        yield client


def virtual_clusters(client: httpx.Client) -> dict[str, Any]:
    response = client.get("/virtual-clusters")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def eventually(check: Any, timeout: float = 15.0) -> None:
    """Retry `check` (which asserts) until it passes: the API shows the controller's last pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_each_vc_shows_its_guarantee_as_a_share_of_the_cluster(as_alice: httpx.Client) -> None:
    vcs = virtual_clusters(as_alice)
    assert set(vcs) == {"default", "research"}
    default, research = vcs["default"], vcs["research"]
    assert (default["capacity"], research["capacity"]) == (75.0, 25.0)
    assert default["maxCapacity"] == 100.0 and default["status"] == "running"
    assert default["cells"] == [{"cellType": "CPU-NODE", "cellNumber": 3}]
    assert default["resourcesGuaranteed"] == {"cpu": 12, "memory": 12 * 1024, "gpu": 0}
    assert research["resourcesGuaranteed"] == {"cpu": 4, "memory": 4 * 1024, "gpu": 0}
    assert default["resourcesTotal"] == {"cpu": 16, "memory": 16 * 1024, "gpu": 0}
    assert (default["guaranteedLeaves"], default["freeLeaves"]) == (12, 12)
    assert (default["guaranteedGpus"], default["usedGpus"], default["freeGpus"]) == (0, 0, 0)
    assert as_alice.get("/virtual-clusters/research").json() == research


def test_an_unknown_vc_is_not_found(as_alice: httpx.Client) -> None:
    response = as_alice.get("/virtual-clusters/nowhere")
    assert response.status_code == 404
    assert response.json()["code"] == "NoVirtualClusterError"


def test_use_rises_while_jobs_run_and_falls_when_they_stop(
    as_alice: httpx.Client, as_admin: httpx.Client, alice: Account
) -> None:
    pair = submit(as_alice, job_yaml(unique("pair"), ["sleep 60"], instances=2))
    blocker = submit(as_admin, job_yaml(unique("blocker"), ["sleep 60"], vc="research", cpu=4))
    wait_for(as_alice, pair, {"RUNNING"})
    wait_for(as_admin, blocker, {"RUNNING"})
    waiter = submit(as_admin, job_yaml(unique("waiter"), ["true"], vc="research"))

    def busy() -> None:
        vcs = virtual_clusters(as_alice)
        default, research = vcs["default"], vcs["research"]
        assert (default["usedLeaves"], default["freeLeaves"]) == (2, 10)
        assert default["resourcesUsed"] == {"cpu": 2, "memory": 2048, "gpu": 0}
        assert default["usedCapacity"] == 12.5
        assert (default["runningJobs"], default["waitingJobs"]) == (1, 0)
        assert (research["usedLeaves"], research["freeLeaves"]) == (4, 0)
        assert (research["runningJobs"], research["waitingJobs"]) == (1, 1)

    eventually(busy)
    nodes = as_alice.get("/cluster/nodes").json()
    held = {(leaf["job"], leaf["vc"], leaf["priority"]) for n in nodes for leaf in n["usage"]}
    assert held == {(pair, "default", 10), (blocker, "research", 10)}
    assert sum(n["leaves"]["used"] for n in nodes) == 6
    usage = as_alice.get("/virtual-clusters", params={"nodes": ""}).json()
    assert {user for node in usage.values() for user in node["users"]} == {alice.username, "admin"}

    for client, name in ((as_alice, pair), (as_admin, waiter), (as_admin, blocker)):
        assert client.put(f"/jobs/{name}/executionType", json={"value": "STOP"}).status_code == 202
        wait_for(client, name)

    def idle() -> None:
        for vc in virtual_clusters(as_alice).values():
            assert (vc["usedLeaves"], vc["runningJobs"], vc["waitingJobs"]) == (0, 0, 0)
            assert vc["resourcesUsed"] == {"cpu": 0, "memory": 0, "gpu": 0}

    eventually(idle)


def test_per_node_usage_has_each_node(as_alice: httpx.Client) -> None:
    usage = as_alice.get("/virtual-clusters", params={"nodes": "true"}).json()
    assert sorted(usage) == ["node1", "node2", "node3", "node4"]
    assert usage["node2"] == {
        "address": "127.0.0.2",
        "healthy": True,
        "gpuTotal": 0,
        "gpuUsed": 0,
        "gpuFree": 0,
        "leafCellType": "CPU",
        "users": [],
    }


def test_nodes_list_their_leaf_cells(as_alice: httpx.Client) -> None:
    nodes = as_alice.get("/cluster/nodes").json()
    assert [(n["name"], n["address"]) for n in nodes] == [
        (f"node{i}", f"127.0.0.{i}") for i in range(1, 5)
    ]
    for node in nodes:
        assert node["healthy"] and node["skuType"] == "CPU"
        assert (node["engineState"], node["engineMessage"]) == ("alive", "")
        assert node["leaves"]["total"] == 4
        assert node["leaves"]["used"] + node["leaves"]["free"] == 4
        assert node["gpus"] == {"total": 0, "used": 0, "free": 0}


def test_sku_types_of_the_cluster_and_of_a_vc(as_alice: httpx.Client) -> None:
    cpu = {"CPU": {"gpu": 0, "cpu": 1, "memory": 1024}}  # no devices: no `device`, as OpenPAI
    assert as_alice.get("/cluster/sku-types").json() == cpu
    assert as_alice.get("/cluster/sku-types", params={"vc": "research"}).json() == cpu
    unknown = as_alice.get("/cluster/sku-types", params={"vc": "nowhere"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "NoVirtualClusterError"
