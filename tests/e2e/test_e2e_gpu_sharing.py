"""Two jobs share one GPU: a real platform (API, controller, local executor, task processes) on
a cluster file that declares one node with one GPU (examples/clusters/gpu-share.yaml). A job on
a quarter of the GPU and a job on half of it run at the same time on GPU 0, each told its share;
the cluster and job APIs and /metrics show who shares the GPU and what is left of it.

This machine has no GPU: what is checked is what each task is given (the GPU it sees, its
share, the MPS limits), which is all PAI controls; CUDA applies the limits where MPS runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server.harness import RunningServer, serve_platform, server_settings
from server.jobapi import detail, submit, wait_for

EXAMPLES = Path(__file__).parents[2] / "examples"
CLUSTER_FILE = EXAMPLES / "clusters" / "gpu-share.yaml"
SHARE_JOB = (EXAMPLES / "jobs" / "gpu-share.yaml").read_text()
# Both tasks print what they were given, then stay until the test has seen them run together.
HOLD = "      - sleep 120\n"


def share_job(name: str, fraction: str, gpu_memory_mb: int) -> str:
    text = SHARE_JOB.replace("name: gpu-share", f"name: {name}")
    text = text.replace("gpu: 0.25", f"gpu: {fraction}")
    text = text.replace("gpuMemoryMB: 4096", f"gpuMemoryMB: {gpu_memory_mb}")
    return text + HOLD


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("gpu-share-home")
    with serve_platform(server_settings(home), CLUSTER_FILE) as server:
        yield server


@pytest.fixture(scope="module")
def client(platform: RunningServer) -> Iterator[httpx.Client]:
    with platform.client(platform.admin_token()) as admin:
        yield admin


@pytest.fixture(scope="module")
def sharing(client: httpx.Client) -> Iterator[dict[str, dict[str, Any]]]:
    """The quarter and the half job, both running; stopped when the module ends."""
    names = {
        "quarter": submit(client, share_job("quarter", "0.25", 4096)),
        "half": submit(client, share_job("half", "0.5", 8192)),
    }
    running = {key: wait_for(client, name, {"RUNNING"}, timeout=90) for key, name in names.items()}
    yield running
    for name in names.values():
        client.put(f"/jobs/{name}/executionType", json={"value": "STOP"})
    for name in names.values():
        wait_for(client, name, timeout=60)


def task_of(job: dict[str, Any]) -> dict[str, Any]:
    (task,) = job["taskRoles"]["main"]["taskStatuses"]
    return task


def log_of(client: httpx.Client, job: dict[str, Any], wanted: str) -> str:
    """The task's log once it contains `wanted`."""
    locations = client.get(task_of(job)["containerLog"]).json()["locations"]
    uri = next(location["uri"] for location in locations if location["name"] == "all")
    deadline = time.monotonic() + 30
    while True:
        text = client.get(uri).text
        if wanted in text or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


def test_a_quarter_and_a_half_run_at_once_on_gpu_0_each_told_its_share(
    client: httpx.Client, sharing: dict[str, dict[str, Any]]
) -> None:
    quarter, half = sharing["quarter"], sharing["half"]

    for name in ("admin~quarter", "admin~half"):  # both still run: they share the GPU
        assert detail(client, name)["jobStatus"]["state"] == "RUNNING"
    for job, fraction in ((quarter, 0.25), (half, 0.5)):
        task = task_of(job)
        assert (task["containerGpus"], task["containerGpuFraction"]) == ("0", fraction)
        assert task["containerNodeName"] == "gpu-node"
    assert "GPU 0, share 0.25, GPU memory 4096 MB" in log_of(client, quarter, "share")
    assert "MPS limits 25% of the GPU, 0=4096M" in log_of(client, quarter, "MPS")
    assert "GPU 0, share 0.5, GPU memory 8192 MB" in log_of(client, half, "share")
    assert "MPS limits 50% of the GPU, 0=8192M" in log_of(client, half, "MPS")


def test_the_cluster_shows_who_shares_gpu_0_and_the_quarter_left(
    client: httpx.Client, sharing: dict[str, dict[str, Any]]
) -> None:
    (node,) = client.get("/cluster/nodes").json()

    assert node["gpus"] == {"total": 1, "used": 1, "free": 0}
    (gpu,) = node["sharedGpus"]
    assert (gpu["gpuIndex"], gpu["freeFraction"], gpu["opportunistic"]) == (0, 0.25, False)
    assert sorted((t["job"], t["gpuFraction"], t["gpuMemoryMB"]) for t in gpu["tasks"]) == [
        ("admin~half", 0.5, 8192),
        ("admin~quarter", 0.25, 4096),
    ]
    assert {t["vc"] for t in gpu["tasks"]} == {"default"}
    vc = client.get("/virtual-clusters/default").json()
    assert (vc["usedGpus"], vc["freeGpus"]) == (1, 0)


def test_a_third_job_waits_for_what_is_left_of_the_gpu(
    client: httpx.Client, sharing: dict[str, dict[str, Any]]
) -> None:
    name = submit(client, share_job("greedy", "0.5", 2048))
    try:
        waiting = wait_for(client, name, {"WAITING"})
        time.sleep(1)  # a scheduling pass has considered it
        reason = detail(client, name)["jobStatus"]["waitReason"]
        assert detail(client, name)["jobStatus"]["state"] == "WAITING"
        assert "0.25 of 1 GPU free to share" in reason["message"], waiting
    finally:
        client.put(f"/jobs/{name}/executionType", json={"value": "STOP"})


def test_metrics_label_each_tasks_share_by_gpu(
    platform: RunningServer, sharing: dict[str, dict[str, Any]]
) -> None:
    answer = httpx.get(f"{platform.base_url}/metrics")
    samples = {
        sample.name: sample
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name == "pai_gpu_allocated"
    }
    assert samples["pai_gpu_allocated"].labels == {"node": "gpu-node", "minor_number": "0"}
    assert samples["pai_gpu_allocated"].value == 0.75
    shares = {
        sample.labels["job_name"]: (sample.labels["minor_number"], sample.value)
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name == "pai_task_gpu_share"
    }
    assert shares == {"admin~quarter": ("0", 0.25), "admin~half": ("0", 0.5)}
