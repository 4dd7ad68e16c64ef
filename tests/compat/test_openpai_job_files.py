"""OpenPAI job files as OpenPAI's portal writes them for a HiveD cluster (`jobs/`), submitted
to a running platform on the four-node CPU cluster: `skuNum` with `skuType` gives each task that
many leaf cells, a `skuNum` that contradicts `resourcePerInstance` is refused at its line, and a
job no SKU of its VC can hold is refused with what it asks for and what the VC offers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.harness import RunningServer
from server.jobapi import submit, wait_for

JOBS = Path(__file__).parent / "jobs"


@pytest.fixture(scope="module")
def admin(platform_server: RunningServer) -> Iterator[httpx.Client]:
    with platform_server.client(platform_server.admin_token()) as client:
        yield client


def post(client: httpx.Client, job_file: str) -> httpx.Response:
    text = (JOBS / job_file).read_text()
    return client.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})


def leaves_held(client: httpx.Client, job: str) -> dict[str, int]:
    """Leaf cells the job holds, by node."""
    nodes: list[dict[str, Any]] = client.get("/cluster/nodes").json()
    held = {node["name"]: sum(use["job"] == job for use in node["usage"]) for node in nodes}
    return {name: count for name, count in held.items() if count}


def test_sku_num_gives_each_task_that_many_cells(admin: httpx.Client) -> None:
    name = submit(admin, (JOBS / "openpai-skunum.yaml").read_text())
    wait_for(admin, name, {"RUNNING"})  # as soon as one task runs; the gang holds all its cells
    assert sum(leaves_held(admin, name).values()) == 4  # two tasks, two CPU slots each
    stopped = admin.put(f"/jobs/{name}/executionType", json={"value": "STOP"})
    assert stopped.status_code == 202, stopped.text
    wait_for(admin, name, {"STOPPED"})


def test_sku_num_beyond_what_the_task_needs_reserves_the_cells(admin: httpx.Client) -> None:
    name = submit(admin, (JOBS / "openpai-skunum-whole-node.yaml").read_text())
    job = wait_for(admin, name, {"RUNNING"})
    node = job["taskRoles"]["taskrole"]["taskStatuses"][0]["containerNodeName"]
    assert leaves_held(admin, name) == {node: 4}  # the whole node, for a task of one CPU

    # OpenPAI's tools see it as a pod on that node, named as its events name the task
    (pod,) = [
        pod
        for pod in admin.get("/kubernetes/pods").json()["items"]
        if pod["metadata"]["labels"]["jobName"] == "openpai-skunum-whole-node"
    ]
    assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == (node, "Running")
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "1",
        "memory": "1024Mi",
        "nvidia.com/gpu": "0",
    }
    stopped = admin.put(f"/jobs/{name}/executionType", json={"value": "STOP"})
    assert stopped.status_code == 202, stopped.text
    wait_for(admin, name, {"STOPPED"})
    events = admin.get(f"/jobs/{name}/events").json()["data"]
    about_task = {event["podUid"] for event in events if event["taskroleName"] == "taskrole"}
    assert about_task == {pod["metadata"]["uid"]}


def test_sku_num_that_contradicts_resource_per_instance_is_refused_at_its_line(
    admin: httpx.Client,
) -> None:
    response = post(admin, "openpai-skunum-conflict.yaml")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "InvalidProtocolError"
    assert body["problems"] == [
        {
            "path": "extras.hivedScheduler.taskRoles.taskrole.skuNum",
            "message": "2 leaf cell(s) of SKU 'CPU' (0 GPUs, 1 CPU and 1024 MB of memory each) "
            "hold less than the resourcePerInstance of task role 'taskrole' (0 GPUs, 4 CPUs and "
            "2048 MB of memory), which needs 4; raise skuNum or lower resourcePerInstance",
            "line": 27,
            "column": 17,
        }
    ]
    assert admin.get("/jobs/admin~openpai-skunum-conflict").status_code == 404


def test_a_job_that_can_never_fit_says_what_it_asks_and_what_the_vc_offers(
    admin: httpx.Client,
) -> None:
    response = post(admin, "openpai-gpu-job.yaml")
    assert response.status_code == 400
    assert response.json()["message"] == (
        "job 'openpai-gpu-job' can never run on this cluster: no SKU of VC 'default' provides "
        "what the tasks ask for: task role 'taskrole' asks for 1 GPU, 4 CPUs and 8192 MB of "
        "memory per task; the SKUs of VC 'default' offer per leaf cell: 'CPU' (0 GPUs, 1 CPU "
        "and 1024 MB of memory)"
    )
