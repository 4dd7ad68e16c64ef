"""What a user does with PAI, through HTTP only: log in, submit the example jobs, follow their
logs, watch them end, stop one. A real platform (API, controller, local executor, processes)
on the four-node CPU cluster, over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.harness import RunningServer, basic_auth
from server.jobapi import first_task, job_yaml, submit, unique, wait_for

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
PASSWORD = "e2e-Password-1"


@pytest.fixture(scope="module")
def user(pai_platform: RunningServer) -> Iterator[httpx.Client]:
    """A new user, logged in with a password as the portal or `pai login` would."""
    pai_platform.create_user("eve", password=PASSWORD)
    with pai_platform.client() as client:
        login = client.post("/authn/basic/login", json={"username": "eve", "password": PASSWORD})
    assert login.status_code == 200, login.text
    assert login.json()["user"] == "eve" and login.json()["admin"] is False
    with pai_platform.client(login.json()["token"]) as client:
        yield client


def follow(client: httpx.Client, job: str, role: str = "main", index: int = 0) -> str:
    """Wait until the task has a place to run, then read its log as it is written."""
    detail = wait_for(client, job, {"RUNNING", "SUCCEEDED", "FAILED"})
    task = next(t for t in detail["taskRoles"][role]["taskStatuses"] if t["taskIndex"] == index)
    locations = client.get(task["containerLog"]).json()["locations"]
    uri = next(location["uri"] for location in locations if location["name"] == "all")
    with client.stream("GET", uri, params={"follow": "true"}) as response:
        assert response.status_code == 200
        return "".join(response.iter_text())


def test_hello_world_runs_and_its_log_can_be_followed(user: httpx.Client) -> None:
    job = submit(user, (EXAMPLES / "hello-world.yaml").read_text())
    assert job == "eve~hello-world"
    log = follow(user, job)
    assert "Hello from task main/0" in log and "Python 3." in log
    status = wait_for(user, job)["jobStatus"]
    assert (status["state"], status["appExitCode"]) == ("SUCCEEDED", 0)
    assert [item["name"] for item in user.get("/jobs", params={"username": "eve"}).json()] == [
        "hello-world"
    ]


def test_a_parameter_server_and_two_workers_train_together(user: httpx.Client) -> None:
    job = submit(user, (EXAMPLES / "ps-worker.yaml").read_text())
    detail = wait_for(user, job, timeout=90)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail["jobStatus"]
    assert len(detail["taskRoles"]["worker"]["taskStatuses"]) == 2
    ps_log = follow(user, job, "ps")
    assert "waiting for 2 workers" in ps_log and "final parameters" in ps_log
    for index in (0, 1):
        assert f"worker {index} step 2" in follow(user, job, "worker", index)


def test_a_running_job_is_stopped_with_an_application_token(
    pai_platform: RunningServer, user: httpx.Client
) -> None:
    application = user.post("/tokens/application").json()["token"]
    with httpx.Client(
        base_url=pai_platform.api_url, headers=basic_auth("eve", application), timeout=30
    ) as tool:
        job = submit(tool, job_yaml(unique("endless"), ["echo started", "sleep 300"]))
        running = wait_for(tool, job, {"RUNNING"})
        assert first_task(running)["taskState"] == "RUNNING"
        stop = tool.put(f"/jobs/{job}/executionType", json={"value": "STOP"})
        assert stop.status_code == 202
        stopped = wait_for(tool, job, timeout=30)
        assert stopped["jobStatus"]["state"] == "STOPPED"
        assert first_task(stopped)["taskState"] == "STOPPED"
        reasons = [event["reason"] for event in tool.get(f"/jobs/{job}/events").json()["data"]]
        assert "StopRequested" in reasons
