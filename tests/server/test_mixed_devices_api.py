"""A cluster mixing NVIDIA GPUs, AMD GPUs and NPUs of a kind PAI has no code for, through a
real platform: the API names each node's kind, jobs get the kind their SKU has with the
variables of its vendor, and a job waiting for NPUs is told so in NPUs."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.harness import Account, RunningServer, StartServer
from server.jobapi import detail, first_task, submit, unique, wait_for

NPU = "acc.example/npu"
CLUSTER = textwrap.dedent(
    f"""\
    physicalCluster:
      skuTypes:
        A100: {{gpu: 1, cpu: 1, memory: 256Mi}}
        MI300: {{gpu: 1, cpu: 1, memory: 256Mi, device: amd.com/gpu}}
        NPU: {{gpu: 1, cpu: 1, memory: 256Mi, device: {NPU}}}
      cellTypes:
        A100-NODE: {{childCellType: A100, childCellNumber: 2, isNodeLevel: true}}
        MI300-NODE: {{childCellType: MI300, childCellNumber: 2, isNodeLevel: true}}
        NPU-NODE: {{childCellType: NPU, childCellNumber: 4, isNodeLevel: true}}
      physicalCells:
        - {{cellType: A100-NODE, cellAddress: nvidia-node}}
        - {{cellType: MI300-NODE, cellAddress: amd-node}}
        - {{cellType: NPU-NODE, cellAddress: npu-node}}
    virtualClusters:
      default:
        virtualCells:
          - {{cellType: A100-NODE, cellNumber: 1}}
          - {{cellType: MI300-NODE, cellNumber: 1}}
          - {{cellType: NPU-NODE, cellNumber: 1}}
    """
)


def device_job(name: str, sku: str, devices: int, command: str) -> str:
    return textwrap.dedent(
        f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites:
          - {{type: dockerimage, name: image, uri: "python:3.11"}}
        taskRoles:
          main:
            instances: 1
            dockerImage: image
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: {devices}}}
            commands:
              - {json.dumps(command)}
        defaults:
          virtualCluster: default
        extras:
          hivedScheduler:
            taskRoles:
              main: {{skuType: {sku}}}
        """
    )


@pytest.fixture
def platform(start_pai_platform: StartServer, tmp_path: Path) -> RunningServer:
    cluster_file = tmp_path / "mixed.yaml"
    cluster_file.write_text(CLUSTER)
    return start_pai_platform(cluster_file=cluster_file)


@pytest.fixture
def as_alice(platform: RunningServer) -> Iterator[httpx.Client]:
    with platform.client(Account.create(platform).token) as client:
        yield client


def stdout_of(client: httpx.Client, job: dict[str, Any]) -> str:
    locations = client.get(first_task(job)["containerLog"]).json()["locations"]
    uri = next(location["uri"] for location in locations if location["name"] == "stdout")
    return client.get(uri).text


def test_the_api_and_metrics_name_each_nodes_device_kind(
    platform: RunningServer, as_alice: httpx.Client
) -> None:
    skus = as_alice.get("/cluster/sku-types").json()
    nodes = {node["name"]: node for node in as_alice.get("/cluster/nodes").json()}

    assert {name: sku["device"] for name, sku in skus.items()} == {
        "A100": "nvidia.com/gpu",
        "MI300": "amd.com/gpu",
        "NPU": NPU,
    }
    assert nodes["npu-node"]["device"] == NPU
    assert nodes["npu-node"]["gpus"]["total"] == 4
    assert nodes["amd-node"]["device"] == "amd.com/gpu"
    metrics = httpx.get(f"{platform.base_url}/metrics").text
    assert 'pai_node_devices{device="acc.example/npu",kind="total",node="npu-node"} 4.0' in metrics
    assert 'pai_node_devices{device="amd.com/gpu",kind="free",node="amd-node"} 2.0' in metrics


def test_jobs_get_devices_of_their_skus_kind_with_its_vendors_variables(
    as_alice: httpx.Client,
) -> None:
    show = 'echo "$PAI_DEVICES|$ROCR_VISIBLE_DEVICES|$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES"'
    npu = submit(as_alice, device_job(unique("npu"), "NPU", 2, show))
    amd = submit(as_alice, device_job(unique("amd"), "MI300", 1, show))

    npu_job, amd_job = wait_for(as_alice, npu), wait_for(as_alice, amd)

    assert npu_job["jobStatus"]["state"] == amd_job["jobStatus"]["state"] == "SUCCEEDED"
    assert stdout_of(as_alice, npu_job) == f"{NPU}=0,{NPU}=1|||none\n"
    assert stdout_of(as_alice, amd_job) == "amd.com/gpu=0|0||none\n"
    assert first_task(npu_job)["containerNodeName"] == "npu-node"


def test_a_job_waiting_for_npus_is_told_in_npus(as_alice: httpx.Client) -> None:
    blocker = submit(as_alice, device_job(unique("blocker"), "NPU", 4, "sleep 60"))
    wait_for(as_alice, blocker, {"RUNNING"})
    waiter = submit(as_alice, device_job(unique("waiter"), "NPU", 2, "true"))

    deadline = time.monotonic() + 15
    reason = detail(as_alice, waiter)["jobStatus"]["waitReason"]
    while reason is None and time.monotonic() < deadline:
        time.sleep(0.1)
        reason = detail(as_alice, waiter)["jobStatus"]["waitReason"]

    assert reason is not None
    assert f"has 4 of 4 {NPU} in use" in reason["message"]
    assert "needs 2 and only 0 are free" in reason["message"]
    as_alice.put(f"/jobs/{blocker}/executionType", json={"value": "STOP"})


def test_a_job_no_node_can_hold_is_refused_in_its_skus_kind(as_alice: httpx.Client) -> None:
    text = device_job(unique("huge"), "NPU", 1, "true").replace("cpu: 1,", "cpu: 64,")

    refused = as_alice.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})

    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    # 64 CPUs take 64 leaf cells of one CPU each: 64 NPUs, on nodes of 4.
    assert f"a task needs 64 {NPU} on one node" in message
    assert "largest cell of VC 'default' holds 4" in message
