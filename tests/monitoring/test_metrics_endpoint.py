"""`/metrics` of a running platform, read as Prometheus reads it."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from server.harness import RunningServer
from server.jobapi import job_yaml, submit, wait_for


def scrape(server: RunningServer) -> dict[str, list[tuple[dict[str, str], float]]]:
    answer = httpx.get(f"{server.base_url}/metrics")  # from loopback: no token needed
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        sample.name: [(s.labels, s.value) for s in family.samples if s.name == sample.name]
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_jobs_nodes_vcs_and_the_api_are_measured(pai_platform: RunningServer) -> None:
    with pai_platform.client(pai_platform.admin_token()) as admin:
        name = submit(admin, job_yaml("metered", ["sleep 60"]))
        wait_for(admin, name, {"RUNNING"})
        admin.get("/jobs")
        time.sleep(0.2)

        metrics = scrape(pai_platform)
        admin.put(f"/jobs/{name}/executionType", json={"value": "STOP"})

    jobs = {
        (labels["state"], labels["virtual_cluster"]): value for labels, value in metrics["pai_jobs"]
    }
    assert jobs[("RUNNING", "default")] >= 1
    states = {
        (labels["node"], labels["state"]): value for labels, value in metrics["pai_node_state"]
    }
    assert states[("node1", "alive")] == 1 and states[("node1", "gone")] == 0
    cells = {
        (labels["virtual_cluster"], labels["kind"]): v for labels, v in metrics["pai_vc_cells"]
    }
    assert cells[("default", "guaranteed")] == 12 and cells[("default", "used")] >= 1
    routes = {labels["route"] for labels, _ in metrics["pai_api_request_duration_seconds_count"]}
    assert {"/api/v2/jobs", "/api/v2/jobs/{framework_name}"} <= routes
    assert metrics["pai_job_submissions_total"][0][1] >= 1
    assert metrics["pai_scheduling_decision_seconds_count"][0][1] >= 1
    assert metrics["pai_controller_pass_seconds_count"][0][1] >= 1
    # at least the job's row, its task's and their states as it was placed and started
    assert metrics["pai_store_rows_written_total"][0][1] >= 3
    assert metrics["pai_home_disk_free_bytes"][0][1] > 0
