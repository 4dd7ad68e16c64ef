"""Limits per user through the REST API of a real platform (`hived` policy, the four-node CPU
cluster whose `default` VC limits each user to 2 CPUs and 2 running jobs): administrators set
groups' limits, users see theirs and their place in the queue."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.harness import LOCAL_CLUSTER_FILE, Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for
from server.test_clusters_api import eventually


def limited_cluster(directory: Path) -> Path:
    path = directory / "limited.yaml"
    text = LOCAL_CLUSTER_FILE.read_text().replace(
        "    - {cellType: CPU-NODE, cellNumber: 3}\n",
        "    - {cellType: CPU-NODE, cellNumber: 3}\n    userLimit: {cpus: 2, jobs: 2}\n",
    )
    path.write_text(text)
    return path


@pytest.fixture
def platform(start_pai_platform: Callable[..., RunningServer], tmp_path: Path) -> RunningServer:
    return start_pai_platform(cluster_file=limited_cluster(tmp_path))


@pytest.fixture
def as_admin(platform: RunningServer) -> Iterator[httpx.Client]:
    with platform.client(platform.admin_token()) as client:
        yield client


def create_group(admin: httpx.Client, name: str, *members: str) -> None:
    response = admin.post(
        "/groups", json={"groupname": name, "extension": {"acls": {"virtualClusters": ["default"]}}}
    )
    assert response.status_code == 201, response.text
    for member in members:
        response = admin.put(f"/users/{member}/group", json={"groupname": name})
        assert response.status_code == 201, response.text


def wait_reason(client: httpx.Client, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def given() -> None:
        reason = client.get(f"/jobs/{name}").json()["jobStatus"]["waitReason"]
        assert reason is not None
        found.update(reason)

    eventually(given)
    return found


def test_an_administrator_sets_lists_and_removes_a_groups_limit(
    platform: RunningServer, as_admin: httpx.Client
) -> None:
    create_group(as_admin, "interns")
    response = as_admin.put("/virtual-clusters/default/user-limits/interns", json={"gpus": 0.5})
    assert response.status_code == 200, response.text
    assert response.json() | {"updatedTime": 0} == {
        "gpus": 0.5,
        "cpus": None,
        "jobs": None,
        "group": "interns",
        "setBy": "admin",
        "updatedTime": 0,
    }
    response = as_admin.put(
        "/virtual-clusters/default/user-limits/interns", json={"cpus": 4, "jobs": 1}
    )
    assert response.status_code == 200, response.text
    limits = as_admin.get("/virtual-clusters/default/user-limits").json()
    assert limits["default"] == {"gpus": None, "cpus": 2.0, "jobs": 2}
    assert [(g["group"], g["gpus"], g["cpus"], g["jobs"]) for g in limits["groups"]] == [
        ("interns", None, 4.0, 1)
    ]
    assert as_admin.get("/virtual-clusters/default").json()["userLimit"]["jobs"] == 2
    audit = as_admin.get("/audit", params={"kind": "user-limit"}).json()
    assert [(event["action"], event["target"]) for event in audit][:2] == [
        ("set", "default/interns"),
        ("set", "default/interns"),
    ]
    response = as_admin.delete("/virtual-clusters/default/user-limits/interns")
    assert response.status_code == 200, response.text
    assert as_admin.get("/virtual-clusters/default/user-limits").json()["groups"] == []
    again = as_admin.delete("/virtual-clusters/default/user-limits/interns")
    assert (again.status_code, again.json()["code"]) == (404, "NoUserLimitError")


def test_bad_limits_are_refused_with_the_field_and_nothing_is_stored(
    platform: RunningServer, as_admin: httpx.Client
) -> None:
    create_group(as_admin, "interns")
    for body, problem in (
        ({"gpus": -1}, "body.gpus: Input should be greater than or equal to 0"),
        ({"jobs": 1.5}, "body.jobs: Input should be a valid integer"),
        ({"memory": 4}, "body.memory: Extra inputs are not permitted"),
        ({"cpus": "lots"}, "body.cpus: Input should be a valid number"),
    ):
        response = as_admin.put("/virtual-clusters/default/user-limits/interns", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "InvalidParametersError"
        assert problem in response.json()["message"]
    unknown_group = as_admin.put("/virtual-clusters/default/user-limits/ghosts", json={})
    assert (unknown_group.status_code, unknown_group.json()["code"]) == (404, "NoGroupError")
    unknown_vc = as_admin.put("/virtual-clusters/nowhere/user-limits/interns", json={})
    assert (unknown_vc.status_code, unknown_vc.json()["code"]) == (404, "NoVirtualClusterError")
    assert as_admin.get("/virtual-clusters/default/user-limits").json()["groups"] == []


def test_only_administrators_set_limits(platform: RunningServer, as_admin: httpx.Client) -> None:
    create_group(as_admin, "interns")
    user = Account.create(platform)
    with platform.client(user.token) as as_user:
        response = as_user.put("/virtual-clusters/default/user-limits/interns", json={"gpus": 9})
        assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
        assert as_user.delete("/virtual-clusters/default/user-limits/interns").status_code == 403
        assert as_user.get("/virtual-clusters/default/user-limits").status_code == 200


def test_a_user_past_the_limit_sees_why_and_a_group_limit_lets_the_job_start(
    platform: RunningServer, as_admin: httpx.Client
) -> None:
    user = Account.create(platform, virtualCluster=["default"])
    with platform.client(user.token) as client:
        first = submit(client, job_yaml(unique("first"), ["sleep 300"], cpu=2))
        wait_for(client, first, {"RUNNING"})
        second = submit(client, job_yaml(unique("second"), ["sleep 300"]))
        reason = wait_reason(client, second)
        assert reason["kind"] == "user_limit"
        assert reason["message"].startswith(
            f"{user.username} uses 2 of the 2 CPUs a user may have in VC 'default'; "
            "this job needs 1 CPUs."
        )
        assert reason.get("queuePosition") is None  # held by its own limit, not queued

        def shown() -> None:
            users = client.get("/virtual-clusters/default/users").json()
            mine = next(u for u in users["users"] if u["username"] == user.username)
            assert (mine["cpus"], mine["jobs"], mine["waitingJobs"]) == (2, 1, 1)
            assert mine["limit"] == {"gpus": None, "cpus": 2.0, "jobs": 2}
            assert users["fairShare"] is True

        eventually(shown)
        create_group(as_admin, "power", user.username)
        response = as_admin.put("/virtual-clusters/default/user-limits/power", json={"cpus": 8})
        assert response.status_code == 200, response.text
        wait_for(client, second, {"RUNNING"})
        users = client.get("/virtual-clusters/default/users").json()["users"]
        mine = next(u for u in users if u["username"] == user.username)
        assert (mine["limitGroups"], mine["limit"]["cpus"], mine["cpus"]) == (["power"], 8, 3)


def test_a_waiting_job_is_told_its_place_in_the_queue(
    platform: RunningServer, as_admin: httpx.Client
) -> None:
    create_group(as_admin, "bulk", "admin")
    response = as_admin.put("/virtual-clusters/default/user-limits/bulk", json={})
    assert response.status_code == 200, response.text  # no limit for the administrator
    filler = submit(as_admin, job_yaml(unique("filler"), ["sleep 300"], cpu=4, instances=3))
    wait_for(as_admin, filler, {"RUNNING"})
    users = [Account.create(platform, virtualCluster=["default"]) for _ in range(3)]
    clients = [platform.client(user.token) for user in users]
    try:
        queued = [submit(client, job_yaml(unique("queued"), ["sleep 1"])) for client in clients]
        for client, name in zip(clients, queued, strict=True):
            wait_reason(client, name)  # every one taken in and waiting: now ask where each is
        reasons = [wait_reason(client, name) for client, name in zip(clients, queued, strict=True)]
        assert {reason["kind"] for reason in reasons} == {"vc_quota"}
        assert [reason["queuePosition"] for reason in reasons] == [1, 2, 3]
        assert {reason["queueLength"] for reason in reasons} == {3}
        assert reasons[1]["message"].endswith(
            "Position 2 of 3 waiting in the VC: higher priorities go first, then users with "
            "less recent GPU time (fair share), then earlier submissions."
        )
    finally:
        for client in clients:
            client.close()
