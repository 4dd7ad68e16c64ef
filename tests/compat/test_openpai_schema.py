"""PAI's answers checked against OpenPAI's own REST API v2 schema: the swagger.yaml shipped in
`@microsoft/openpai-js-sdk`, read from the installed package at test time.

Every operation of that schema is either sent to a running platform here, with the status
OpenPAI documents for it, or listed in NOT_IMPLEMENTED with the reason; the response body must
fit the schema OpenPAI documents for that status. Requests are sent the way the schema
describes them (a form-encoded login, OpenPAI's trailing slashes), and errors are checked where
the schema documents one with a code it knows.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml

from compat.openapi30 import OpenApiDocument
from server.harness import Account, RunningServer, bearer_auth
from server.jobapi import submit, wait_for

# On the worker that runs test_openpai_sdk.py too: one `npm ci` of the SDK instead of two.
pytestmark = pytest.mark.xdist_group("openpai-sdk")

NOT_IMPLEMENTED = {
    ("GET", "/api/v2/authn/oidc/login"): "answered in OIDC mode only; this platform runs in "
    "basic mode (tests/server/test_oidc_signin.py signs in through a real provider)",
    ("GET", "/api/v2/authn/oidc/logout"): "answered in OIDC mode only; this platform runs in "
    "basic mode (tests/server/test_oidc_signin.py signs in through a real provider)",
    ("GET", "/api/v2/storages"): "PAI has no storage API yet",
    ("GET", "/api/v2/storages/{storage}"): "PAI has no storage API yet",
}

JOB_FILE = """protocolVersion: 2
name: {name}
type: job
prerequisites:
  - {{type: dockerimage, name: docker_image_0, uri: "openpai/standard:python_3.6"}}
taskRoles:
  taskrole:
    instances: 1
    dockerImage: docker_image_0
    resourcePerInstance: {{gpu: 0, cpu: 1, memoryMB: 512}}
    commands: [{command}]
defaults:
  virtualCluster: default
"""


def job_file(name: str, command: str) -> str:
    return JOB_FILE.format(name=name, command=command)


@dataclass
class Platform:
    """A running platform with a user `alice` and three of her jobs: one that ended, one
    that runs, and one that runs until a case stops it."""

    server: RunningServer
    admin: httpx.Client
    alice: Account
    as_alice: httpx.Client
    anonymous: httpx.Client
    ended: str
    running: str
    stoppable: str

    def new_user(self) -> str:
        return self.server.create_user(f"u_{uuid.uuid4().hex[:10]}").username

    def new_group(self) -> str:
        name = f"g_{uuid.uuid4().hex[:10]}"
        created = self.admin.post("/groups", json={"groupname": name})
        assert created.status_code == 201, created.text
        return name


@pytest.fixture(scope="module")
def platform(platform_server: RunningServer) -> Iterator[Platform]:
    server = platform_server
    alice = Account.create(server, username="alice")
    with (
        server.client(server.admin_token()) as admin,
        server.client(alice.token) as as_alice,
        server.client() as anonymous,
    ):
        jobs = {
            "ended": job_file("ended", "echo hello"),
            "running": job_file("running", "sleep 600"),
            "stoppable": job_file("stoppable", "sleep 600"),
        }
        names = {key: submit(as_alice, text) for key, text in jobs.items()}
        wait_for(as_alice, names["ended"], {"SUCCEEDED"})
        wait_for(as_alice, names["running"], {"RUNNING"})
        wait_for(as_alice, names["stoppable"], {"RUNNING"})
        yield Platform(server, admin, alice, as_alice, anonymous, **names)


TASK_UID_AS_SENT: dict[str, Any] = {"type": "string"}
"""OpenPAI's server sends a task's `taskUid` as text (FrameworkController's `instanceUID`,
"<attempt>_<pod UID>"), and its own TaskStatus schema says so; the job detail's and the job
history's task statuses in its swagger.yaml say `integer` (or nothing), which no OpenPAI server
ever sent. A client that follows the server, like the SDK's, breaks on a number."""


def with_task_uid_as_sent(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenPAI's schema with every task status's `taskUid` typed as its server sends it."""
    corrected = copy.deepcopy(schema)
    components = corrected["components"]["schemas"]
    history_roles = components["JobAttempt"]["properties"]["taskRoles"]
    # The history's schema describes the role of its example, "taskrole", where the detail's
    # takes a role of any name: here every role is checked alike.
    history_roles["additionalProperties"] = history_roles["properties"].pop("taskrole")
    for schema_name in ("JobDetail", "JobAttempt"):
        role = components[schema_name]["properties"]["taskRoles"]["additionalProperties"]
        task_status = role["properties"]["taskStatuses"]["items"]
        task_status["properties"]["taskUid"] = TASK_UID_AS_SENT
        task_status.setdefault("required", []).append("taskUid")
    return corrected


@pytest.fixture(scope="module")
def openpai_api(openpai_rest_schema: dict[str, Any]) -> OpenApiDocument:
    return OpenApiDocument(with_task_uid_as_sent(openpai_rest_schema))


Send = Callable[[Platform], httpx.Response]


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    """The operation's path in OpenPAI's schema."""
    status: int
    send: Send


CASES: dict[str, Case] = {}


def case(name: str, method: str, path: str, status: int) -> Callable[[Send], Send]:
    def register(send: Send) -> Send:
        CASES[name] = Case(method, path, status, send)
        return send

    return register


TASK = (
    "/api/v2/jobs/{user}~{job}/attempts/{jobAttemptId}"
    "/taskRoles/{taskRoleName}/taskIndex/{taskIndex}/attempts"
)


# -- info, authentication, tokens -----------------------------------------------------------------


@case("getClusterInfo", "GET", "/api/v2/info", 200)
def _info(p: Platform) -> httpx.Response:
    return p.anonymous.get("/info")


@case("basicLogin (form-encoded)", "POST", "/api/v2/authn/basic/login", 200)
def _login(p: Platform) -> httpx.Response:
    form = {"username": "alice", "password": p.alice.password, "expiration": "4000"}
    return p.anonymous.post("/authn/basic/login", data=form)


@case("basicLogout", "DELETE", "/api/v2/authn/basic/logout", 200)
def _logout(p: Platform) -> httpx.Response:
    token = p.server.login("alice", p.alice.password)
    return p.anonymous.delete("/authn/basic/logout", headers=bearer_auth(token))


@case("getTokens", "GET", "/api/v2/tokens", 200)
def _tokens(p: Platform) -> httpx.Response:
    return p.as_alice.get("/tokens")


@case("getTokens without a token", "GET", "/api/v2/tokens", 401)
def _tokens_anonymous(p: Platform) -> httpx.Response:
    return p.anonymous.get("/tokens")


@case("createApplicationToken", "POST", "/api/v2/tokens/application", 200)
def _application_token(p: Platform) -> httpx.Response:
    return p.as_alice.post("/tokens/application")


@case("deleteToken", "DELETE", "/api/v2/tokens/{token}", 200)
def _delete_token(p: Platform) -> httpx.Response:
    token = p.as_alice.post("/tokens/application").json()["token"]
    return p.as_alice.delete(f"/tokens/{token}")


# -- users and groups -----------------------------------------------------------------------------


@case("createUser", "POST", "/api/v2/users", 201)
def _create_user(p: Platform) -> httpx.Response:
    body = {"username": f"u_{uuid.uuid4().hex[:10]}", "password": "pass-word-1", "email": ""}
    return p.admin.post("/users", json=body)


@case("getAllUser", "GET", "/api/v2/users", 200)
def _users(p: Platform) -> httpx.Response:
    return p.admin.get("/users")


@case("updateUser", "PUT", "/api/v2/users", 201)
def _update_user(p: Platform) -> httpx.Response:
    body = {"patch": True, "data": {"username": p.new_user(), "email": "x@example.com"}}
    return p.admin.put("/users", json=body)


@case("updateUserSelf", "PUT", "/api/v2/users/me", 201)
def _update_self(p: Platform) -> httpx.Response:
    body = {"patch": True, "data": {"username": "alice", "extension": {"editor": "vim"}}}
    return p.as_alice.put("/users/me", json=body)


@case("getUser", "GET", "/api/v2/users/{user}", 200)
def _user(p: Platform) -> httpx.Response:
    return p.as_alice.get("/users/alice")


@case("getUser of nobody", "GET", "/api/v2/users/{user}", 404)
def _no_user(p: Platform) -> httpx.Response:
    return p.admin.get("/users/nobody_at_all")


@case("deleteUser", "DELETE", "/api/v2/users/{user}", 200)
def _delete_user(p: Platform) -> httpx.Response:
    return p.admin.delete(f"/users/{p.new_user()}")


@case("deleteUser by a non-admin", "DELETE", "/api/v2/users/{user}", 403)
def _delete_user_forbidden(p: Platform) -> httpx.Response:
    return p.as_alice.delete(f"/users/{p.new_user()}")


@case("updateUserGroup", "PUT", "/api/v2/users/{user}/group/", 201)
def _add_to_group(p: Platform) -> httpx.Response:
    return p.admin.put(f"/users/{p.new_user()}/group/", json={"groupname": p.new_group()})


@case("deleteUserGroup", "DELETE", "/api/v2/users/{user}/group/", 201)
def _remove_from_group(p: Platform) -> httpx.Response:
    user, group = p.new_user(), p.new_group()
    p.admin.put(f"/users/{user}/group/", json={"groupname": group})
    return p.admin.request("DELETE", f"/users/{user}/group/", json={"groupname": group})


@case("updateUserGrouplist", "PUT", "/api/v2/users/{user}/grouplist/", 201)
def _grouplist(p: Platform) -> httpx.Response:
    return p.admin.put(f"/users/{p.new_user()}/grouplist/", json={"grouplist": ["default"]})


@case("getAllGroup", "GET", "/api/v2/groups", 200)
def _groups(p: Platform) -> httpx.Response:
    return p.admin.get("/groups")


@case("createGroup", "POST", "/api/v2/groups", 201)
def _create_group(p: Platform) -> httpx.Response:
    body = {"groupname": f"g_{uuid.uuid4().hex[:10]}", "description": "made by a test"}
    return p.admin.post("/groups", json=body)


@case("updateGroup", "PUT", "/api/v2/groups", 201)
def _update_group(p: Platform) -> httpx.Response:
    body = {"patch": True, "data": {"groupname": p.new_group(), "description": "changed"}}
    return p.admin.put("/groups", json=body)


@case("getGroup", "GET", "/api/v2/groups/{group}", 200)
def _group(p: Platform) -> httpx.Response:
    return p.admin.get("/groups/default")


@case("getGroup of no group", "GET", "/api/v2/groups/{group}", 404)
def _no_group(p: Platform) -> httpx.Response:
    return p.admin.get("/groups/no_such_group")


@case("deleteGroup", "DELETE", "/api/v2/groups/{group}", 201)
def _delete_group(p: Platform) -> httpx.Response:
    return p.admin.delete(f"/groups/{p.new_group()}")


@case("getGroupMembers", "GET", "/api/v2/groups/{group}/userlist", 200)
def _members(p: Platform) -> httpx.Response:
    return p.admin.get("/groups/default/userlist")


# -- virtual clusters and Kubernetes ----------------------------------------------------------


@case("listVirtualClusters", "GET", "/api/v2/virtual-clusters", 200)
def _vcs(p: Platform) -> httpx.Response:
    return p.as_alice.get("/virtual-clusters")


@case("getVirtualCluster", "GET", "/api/v2/virtual-clusters/{vc}", 200)
def _vc(p: Platform) -> httpx.Response:
    return p.as_alice.get("/virtual-clusters/default")


@case("getVirtualCluster of no VC", "GET", "/api/v2/virtual-clusters/{vc}", 404)
def _no_vc(p: Platform) -> httpx.Response:
    return p.as_alice.get("/virtual-clusters/nowhere")


@case("getK8sNodes", "GET", "/api/v2/kubernetes/nodes", 200)
def _nodes(p: Platform) -> httpx.Response:
    return p.admin.get("/kubernetes/nodes")


@case("getK8sNodes by a non-admin", "GET", "/api/v2/kubernetes/nodes", 403)
def _nodes_forbidden(p: Platform) -> httpx.Response:
    return p.as_alice.get("/kubernetes/nodes")


@case("getK8sPods", "GET", "/api/v2/kubernetes/pods", 200)
def _pods(p: Platform) -> httpx.Response:
    return p.admin.get("/kubernetes/pods", params={"namespace": "default"})


# -- jobs -----------------------------------------------------------------------------------------


@case("createJob", "POST", "/api/v2/jobs", 202)
def _create_job(p: Platform) -> httpx.Response:
    text = job_file(f"created-{uuid.uuid4().hex[:8]}", "exit 0")
    return p.as_alice.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})


@case("createJob of a name in use", "POST", "/api/v2/jobs", 409)
def _create_job_again(p: Platform) -> httpx.Response:
    text = job_file("ended", "exit 0")
    return p.as_alice.post("/jobs", content=text, headers={"Content-Type": "text/yaml"})


@case("listJobs", "GET", "/api/v2/jobs", 200)
def _jobs(p: Platform) -> httpx.Response:
    return p.as_alice.get("/jobs", params={"username": "alice"})


@case("listJobs withTotalCount", "GET", "/api/v2/jobs", 200)
def _jobs_counted(p: Platform) -> httpx.Response:
    return p.as_alice.get("/jobs", params={"withTotalCount": "true", "limit": "2"})


@case("getJob (ended)", "GET", "/api/v2/jobs/{user}~{job}", 200)
def _ended_job(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}")


@case("getJob (running)", "GET", "/api/v2/jobs/{user}~{job}", 200)
def _running_job(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.running}")


@case("getJob of no job", "GET", "/api/v2/jobs/{user}~{job}", 404)
def _no_job(p: Platform) -> httpx.Response:
    return p.as_alice.get("/jobs/alice~no-such-job")


@case("getJob of an attempt", "GET", "/api/v2/jobs/{user}~{job}/attempts/{jobAttemptId}", 200)
def _job_attempt_detail(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/attempts/0")


@case("getJobConfig", "GET", "/api/v2/jobs/{user}~{job}/config", 200)
def _config(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/config")


@case("getJobConfig of no job", "GET", "/api/v2/jobs/{user}~{job}/config", 404)
def _no_config(p: Platform) -> httpx.Response:
    return p.as_alice.get("/jobs/alice~no-such-job/config")


@case("updateJobExecutionType", "PUT", "/api/v2/jobs/{user}~{job}/executionType", 202)
def _stop(p: Platform) -> httpx.Response:
    return p.as_alice.put(f"/jobs/{p.stoppable}/executionType", json={"value": "STOP"})


@case("addTag", "PUT", "/api/v2/jobs/{user}~{job}/tag", 200)
def _tag(p: Platform) -> httpx.Response:
    return p.as_alice.put(f"/jobs/{p.ended}/tag", json={"value": "checked"})


@case("deleteTag", "DELETE", "/api/v2/jobs/{user}~{job}/tag", 200)
def _untag(p: Platform) -> httpx.Response:
    p.as_alice.put(f"/jobs/{p.ended}/tag", json={"value": "passing"})
    return p.as_alice.request("DELETE", f"/jobs/{p.ended}/tag", json={"value": "passing"})


@case("getEvents", "GET", "/api/v2/jobs/{user}~{job}/events", 200)
def _events(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/events")


@case("getJobAttemptsHealthz", "GET", "/api/v2/jobs/{user}~{job}/job-attempts/healthz", 200)
def _healthz(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/job-attempts/healthz")


@case("getJobAttempts", "GET", "/api/v2/jobs/{user}~{job}/job-attempts", 200)
def _attempts(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/job-attempts")


@case("getJobAttempt", "GET", "/api/v2/jobs/{user}~{job}/job-attempts/{attemptIndex}", 200)
def _attempt(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.running}/job-attempts/0")


@case("getTask", "GET", TASK, 200)
def _task(p: Platform) -> httpx.Response:
    return p.as_alice.get(f"/jobs/{p.ended}/attempts/0/taskRoles/taskrole/taskIndex/0/attempts")


@case("getTaskLogs", "GET", TASK + "/{taskAttemptId}/logs", 200)
def _logs(p: Platform) -> httpx.Response:
    return p.as_alice.get(
        f"/jobs/{p.ended}/attempts/0/taskRoles/taskrole/taskIndex/0/attempts/0/logs"
    )


# -- the checks -----------------------------------------------------------------------------------


def test_every_operation_of_openpai_is_checked_or_known_missing(
    openpai_api: OpenApiDocument,
) -> None:
    checked = {(check.method, check.path) for check in CASES.values()}
    assert openpai_api.operations() - checked == set(NOT_IMPLEMENTED)
    assert not checked - openpai_api.operations(), "a case names no operation of the schema"


@pytest.mark.parametrize("name", list(CASES))
def test_response_fits_openpai_schema(
    name: str, platform: Platform, openpai_api: OpenApiDocument
) -> None:
    check = CASES[name]
    response = check.send(platform)
    assert response.status_code == check.status, response.text
    problems = openpai_api.problems(check.method, check.path, check.status, _body(response))
    assert not problems, f"{name}: {response.text[:2000]}\n" + "\n".join(problems)


def _body(response: httpx.Response) -> Any:
    media_type = response.headers.get("content-type", "").split(";")[0]
    if media_type == "application/json":
        return response.json()
    if media_type == "text/yaml":
        return yaml.safe_load(response.text)
    return response.text
