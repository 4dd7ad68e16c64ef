"""The job API through a real platform (API, controller, local executor, real processes) on
the four-node CPU cluster, over SQLite and PostgreSQL.

Jobs of the module's users run side by side in the `default` VC (12 CPU slots); the
`research` VC (4 slots, one node) is used only where a test needs a full VC.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import text

from pai.store import Database
from server.harness import Account, RunningServer, StartServer, basic_auth, server_settings
from server.jobapi import detail, first_task, job_yaml, submit, unique, wait_for


@pytest.fixture(scope="module")
def pai_server(pai_platform: RunningServer) -> RunningServer:
    """The accounts of conftest.py (admin, alice, bob) live on the whole platform here."""
    return pai_platform


@pytest.fixture(scope="module")
def carol(pai_server: RunningServer, admin: Account) -> Account:
    """A user of the `research` VC."""
    with pai_server.client(admin.token) as client:
        acls = {"virtualClusters": ["research"]}
        created = client.post(
            "/groups", json={"groupname": "researchers", "extension": {"acls": acls}}
        )
        assert created.status_code == 201, created.text
    return Account.create(pai_server, virtualCluster=["research"])


def api(server: RunningServer, account: Account) -> Iterator[httpx.Client]:
    with server.client(account.token) as client:
        yield client


@pytest.fixture(scope="module")
def as_alice(pai_server: RunningServer, alice: Account) -> Iterator[httpx.Client]:
    yield from api(pai_server, alice)


@pytest.fixture(scope="module")
def as_bob(pai_server: RunningServer, bob: Account) -> Iterator[httpx.Client]:
    yield from api(pai_server, bob)


@pytest.fixture(scope="module")
def as_carol(pai_server: RunningServer, carol: Account) -> Iterator[httpx.Client]:
    yield from api(pai_server, carol)


SECRET = "s3cr3t-value-for-the-config-test"


@pytest.fixture(scope="module")
def jobs(as_alice: httpx.Client) -> dict[str, str]:
    """Alice's jobs, submitted together at the start so that they run side by side."""
    return {
        "hello": submit(
            as_alice,
            job_yaml(unique("hello"), ["echo hello from $PAI_JOB_NAME", "echo oops >&2"]),
        ),
        "failing": submit(
            as_alice,
            job_yaml(
                unique("failing"),
                ["echo trying", "exit 1"],
                top="jobRetryCount: 1",
                role="taskRetryCount: 1",
                extras="  gangAllocation: false",
            ),
        ),
        "secret": submit(
            as_alice,
            job_yaml(
                unique("secret"),
                ['test -n "<% $secrets.token %>" && echo the token is set'],
                top=f"secrets:\n  token: {SECRET}",
            ),
        ),
    }


# -- submitting ---------------------------------------------------------------------------------


def test_a_submitted_job_is_accepted_runs_and_succeeds(
    as_alice: httpx.Client, alice: Account, jobs: dict[str, str]
) -> None:
    name = jobs["hello"]
    assert name.startswith(f"{alice.username}~hello-")
    job = wait_for(as_alice, name)
    status = job["jobStatus"]
    assert (status["state"], status["appExitCode"], status["retries"]) == ("SUCCEEDED", 0, 0)
    assert status["appExitSpec"]["phrase"] == "Succeeded"
    assert status["waitReason"] is None
    assert status["launchedTime"] <= status["completedTime"]
    assert job["frameworkName"] == name and job["jobPriority"] == "test"
    task = first_task(job)
    assert task["taskState"] == "SUCCEEDED" and task["containerExitCode"] == 0
    assert task["containerIp"].startswith("127.0.0.") and task["containerNodeName"]
    assert set(task["containerPorts"]) == {"ssh", "http"}


def test_submission_answers_202_with_the_full_name(as_bob: httpx.Client, bob: Account) -> None:
    name = unique("accepted")
    response = as_bob.post("/jobs", content=job_yaml(name, ["true"]))
    assert response.status_code == 202
    assert response.json() == {
        "status": 202,
        "message": f"job {bob.username}~{name} accepted",
        "name": f"{bob.username}~{name}",
    }


def test_a_job_may_be_submitted_as_json(as_bob: httpx.Client, bob: Account) -> None:
    name = unique("json")
    body = yaml.safe_load(job_yaml(name, ["true"]))
    response = as_bob.post("/jobs", json=body)
    assert response.status_code == 202, response.text
    assert wait_for(as_bob, f"{bob.username}~{name}")["jobStatus"]["state"] == "SUCCEEDED"


def test_text_with_nul_in_a_job_is_refused_where_it_is(as_bob: httpx.Client) -> None:
    """A JSON (or YAML) escape can put NUL in a job, which PostgreSQL cannot store: it was a 500
    there and accepted on SQLite; now it is a located problem on both."""
    name = unique("nul")
    body = yaml.safe_load(job_yaml(name, ["echo a\x00b"]))
    response = as_bob.post("/jobs", json=body)
    assert response.status_code == 400, response.text
    [problem] = response.json()["problems"]
    assert problem["path"] == "taskRoles.main.commands[0]" and "NUL" in problem["message"]
    assert as_bob.get("/jobs", params={"keyword": name}).json() == []


def test_a_broken_job_file_is_refused_with_each_problem_located(as_bob: httpx.Client) -> None:
    text = job_yaml(unique("broken"), ["true"]).replace("    instances: 1", "    instances: many")
    text = text.replace("type: job", "type: job\nunknownField: 1")
    response = as_bob.post("/jobs", content=text)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "InvalidProtocolError"
    located = {problem["path"]: problem["line"] for problem in body["problems"]}
    lines = text.splitlines()
    assert "unknownField" in lines[located["unknownField"] - 1]
    assert "instances: many" in lines[located["taskRoles.main.instances"] - 1]


def test_yaml_that_does_not_parse_is_refused_with_its_line(as_bob: httpx.Client) -> None:
    response = as_bob.post("/jobs", content="protocolVersion: 2\nname: [unclosed\n")
    assert response.status_code == 400
    assert response.json()["code"] == "InvalidProtocolError"
    assert all(problem["line"] for problem in response.json()["problems"])


def test_a_job_that_can_never_fit_is_refused(as_bob: httpx.Client) -> None:
    response = as_bob.post("/jobs", content=job_yaml(unique("huge"), ["true"], cpu=5))
    assert response.status_code == 400
    assert response.json()["code"] == "InvalidProtocolError"
    assert "can never run" in response.json()["message"]


def test_a_vc_the_user_is_not_granted_is_forbidden(as_bob: httpx.Client) -> None:
    response = as_bob.post("/jobs", content=job_yaml(unique("research"), ["true"], vc="research"))
    assert response.status_code == 403
    assert response.json()["code"] == "ForbiddenUserError"


def test_an_unknown_vc_is_not_found(as_bob: httpx.Client) -> None:
    response = as_bob.post("/jobs", content=job_yaml(unique("nowhere"), ["true"], vc="nowhere"))
    assert response.status_code == 404
    assert response.json()["code"] == "NoVirtualClusterError"


def test_a_name_already_used_by_the_user_conflicts(as_bob: httpx.Client) -> None:
    text = job_yaml(unique("twice"), ["true"])
    submit(as_bob, text)
    response = as_bob.post("/jobs", content=text)
    assert response.status_code == 409
    assert response.json()["code"] == "ConflictJobError"


def test_a_submission_sent_again_under_its_id_is_accepted_again_not_doubled(
    as_bob: httpx.Client,
) -> None:
    name = unique("again")
    text = job_yaml(name, ["true"])
    first_id = {"X-PAI-Submission-Id": "6f1c2a5e-3b8d-4f7a-9c21-0a4d5e6f7a8b"}

    first = as_bob.post("/jobs", content=text, headers=first_id)
    again = as_bob.post("/jobs", content=text, headers=first_id)  # its answer was lost
    other = as_bob.post("/jobs", content=text, headers={"X-PAI-Submission-Id": "another-1"})
    malformed = as_bob.post("/jobs", content=text, headers={"X-PAI-Submission-Id": "a b"})

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["name"] == first.json()["name"]
    assert (other.status_code, other.json()["code"]) == (409, "ConflictJobError")
    assert malformed.status_code == 400
    username = first.json()["name"].split("~")[0]
    listed = as_bob.get("/jobs", params={"username": username}).json()
    assert [job["name"] for job in listed].count(name) == 1


def test_submissions_over_the_rate_limit_are_refused(
    start_pai_platform: StartServer, pai_database_url: str, tmp_path: Any
) -> None:
    server = start_pai_platform(
        server_settings(tmp_path / "limited", pai_database_url, submission_rate_limit=2)
    )
    with server.client(server.admin_token()) as client:
        for _ in range(2):
            submit(client, job_yaml(unique("limited"), ["true"]))
        response = client.post("/jobs", content=job_yaml(unique("limited"), ["true"]))
    assert response.status_code == 429
    assert response.json()["code"] == "TooManyRequestsError"
    assert int(response.headers["Retry-After"]) > 0


# -- listing ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lister(pai_server: RunningServer, carol: Account) -> Account:
    """A user of both VCs whose only jobs are `listed`."""
    return Account.create(pai_server, virtualCluster=["default", "research"])


@pytest.fixture(scope="module")
def listed(pai_server: RunningServer, lister: Account) -> dict[str, str]:
    """Three finished jobs of `lister`, submitted in the order a, b, c."""
    suffix = unique("x")
    specs = {
        "a": job_yaml(
            f"list-a-{suffix}", ["true"], extras="  hivedScheduler:\n    jobPriorityClass: prod"
        ),
        "b": job_yaml(f"list-b-{suffix}", ["exit 1"]),
        "c": job_yaml(f"list-c-{suffix}", ["true"], vc="research"),
    }
    with pai_server.client(lister.token) as client:
        names = {}
        for key, text in specs.items():
            names[key] = submit(client, text)
            time.sleep(0.01)  # distinct submission times
        for name in names.values():
            wait_for(client, name)
        assert client.put(f"/jobs/{names['a']}/tag", json={"value": f"blue-{suffix}"}).is_success
        assert client.put(f"/jobs/{names['b']}/tag", json={"value": f"red-{suffix}"}).is_success
    return {**names, "suffix": suffix}


def listing(client: httpx.Client, **params: Any) -> list[str]:
    response = client.get("/jobs", params=params)
    assert response.status_code == 200, response.text
    return [f"{item['username']}~{item['name']}" for item in response.json()]


def test_the_list_filters_by_each_field(
    as_alice: httpx.Client, lister: Account, listed: dict[str, str]
) -> None:
    a, b, c, suffix = listed["a"], listed["b"], listed["c"], listed["suffix"]
    user = lister.username
    assert listing(as_alice, username=user) == [c, b, a]
    assert listing(as_alice, username=f"{user},nobody") == [c, b, a]
    assert listing(as_alice, username=user, vc="research") == [c]
    assert listing(as_alice, username=user, vc="research,default") == [c, b, a]
    assert listing(as_alice, username=user, state="FAILED") == [b]
    assert listing(as_alice, username=user, state="SUCCEEDED,FAILED") == [c, b, a]
    assert listing(as_alice, keyword=f"list-a-{suffix}") == [a]
    assert listing(as_alice, keyword=suffix) == [c, b, a]
    assert listing(as_alice, tagsContain=f"blue-{suffix},red-{suffix}") == [b, a]
    assert listing(as_alice, username=user, tagsNotContain=f"blue-{suffix}") == [c, b]
    assert listing(as_alice, username=user, jobPriority="prod") == [a]
    assert listing(as_alice, username=user, jobPriority="default") == [c, b]


def test_the_list_pages_and_orders(
    as_alice: httpx.Client, lister: Account, listed: dict[str, str]
) -> None:
    a, b, c = listed["a"], listed["b"], listed["c"]
    user = lister.username
    assert listing(as_alice, username=user, order="submissionTime,ASC") == [a, b, c]
    assert listing(as_alice, username=user, order="jobName,DESC") == [c, b, a]
    assert listing(as_alice, username=user, order="vc,DESC", limit=1) == [c]
    assert listing(as_alice, username=user, order="jobName,ASC", offset=1, limit=1) == [b]
    assert listing(as_alice, username=user, offset=3) == []
    counted = as_alice.get("/jobs", params={"username": user, "limit": 1, "withTotalCount": True})
    assert counted.json()["totalCount"] == 3
    assert [item["name"] for item in counted.json()["data"]] == [c.split("~")[1]]


def test_a_list_item_has_the_openpai_fields(
    as_alice: httpx.Client, lister: Account, listed: dict[str, str]
) -> None:
    [item] = as_alice.get("/jobs", params={"keyword": listed["b"].split("~")[1]}).json()
    assert item["username"] == lister.username and item["virtualCluster"] == "default"
    assert (item["state"], item["appExitCode"], item["subState"]) == ("FAILED", 255, "Completed")
    assert item["tags"] == [f"red-{listed['suffix']}"]
    totals = (item["totalTaskNumber"], item["totalTaskRoleNumber"], item["totalGpuNumber"])
    assert totals == (1, 1, 0)
    assert item["retryDetails"] == {"user": 0, "platform": 0, "resource": 0}
    assert item["submissionTime"] <= item["launchedTime"] <= item["completedTime"]
    assert len(item["debugId"]) == 32 and item["jobPriority"] == "test"


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 50001},
        {"limit": 0},
        {"offset": -1},
        {"offset": 2**63},  # past what the databases take: was a 500
        {"order": "bogus,ASC"},
        {"order": "jobName,SIDEWAYS"},
        {"state": "DONE"},
        {"jobPriority": "urgent"},
        {"keyword": ["a", "b"]},  # lists are comma-separated
    ],
)
def test_invalid_list_parameters_are_refused(
    as_alice: httpx.Client, params: dict[str, Any]
) -> None:
    response = as_alice.get("/jobs", params=params)
    assert response.status_code == 400
    assert response.json()["code"] == "InvalidParametersError"


# -- details ------------------------------------------------------------------------------------


def test_a_job_waiting_for_its_vc_says_why(as_carol: httpx.Client, as_bob: httpx.Client) -> None:
    blocker = submit(as_carol, job_yaml(unique("blocker"), ["sleep 60"], vc="research", cpu=4))
    running = wait_for(as_carol, blocker, {"RUNNING"})
    task = first_task(running)
    assert task["taskState"] == "RUNNING" and task["launchedTime"] is not None
    waiter = submit(as_carol, job_yaml(unique("waiter"), ["true"], vc="research"))
    waiting = wait_for(as_carol, waiter, {"WAITING"})
    deadline = time.monotonic() + 10
    while waiting["jobStatus"]["waitReason"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
        waiting = detail(as_carol, waiter)
    reason = waiting["jobStatus"]["waitReason"]
    assert reason["kind"] == "vc_quota" and reason["message"]
    assert first_task(waiting)["containerLog"] == ""  # no log before it is placed
    logs = as_carol.get(f"/jobs/{waiter}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs")
    assert logs.status_code == 404 and logs.json()["code"] == "NoTaskLogError"

    started = as_carol.put(f"/jobs/{blocker}/executionType", json={"value": "START"})
    assert started.status_code == 202  # already started: nothing changes
    forbidden = as_bob.put(f"/jobs/{blocker}/executionType", json={"value": "STOP"})
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "ForbiddenUserError"
    for name in (waiter, blocker):
        stopped = as_carol.put(f"/jobs/{name}/executionType", json={"value": "STOP"})
        assert stopped.status_code == 202, stopped.text
    assert wait_for(as_carol, blocker)["jobStatus"]["state"] == "STOPPED"
    final = wait_for(as_carol, waiter)["jobStatus"]
    assert final["state"] == "STOPPED"
    assert final["appExitSpec"]["phrase"] == "StopFrameworkRequested"
    again = as_carol.put(f"/jobs/{blocker}/executionType", json={"value": "START"})
    assert again.status_code == 400 and again.json()["code"] == "InvalidParametersError"


def test_a_failed_job_explains_its_exit_and_keeps_every_attempt(
    as_alice: httpx.Client, jobs: dict[str, str]
) -> None:
    name = jobs["failing"]
    status = wait_for(as_alice, name)["jobStatus"]
    assert (status["state"], status["appExitCode"], status["attemptId"]) == ("FAILED", 255, 1)
    assert status["appExitSpec"]["phrase"] == "PAIRuntimeUnknownFailed"
    assert status["appExitSpec"]["solution"]
    assert status["appExitTriggerTaskRoleName"] == "main" and status["appExitTriggerTaskIndex"] == 0
    assert status["retries"] == 1 and status["retryDetails"]["user"] == 1

    attempts = as_alice.get(f"/jobs/{name}/job-attempts").json()
    assert [(a["jobStatus"]["attemptId"], a["isLatest"]) for a in attempts] == [
        (0, False),
        (1, True),
    ]
    assert attempts[0]["jobStatus"]["attemptState"] == "FAILED"
    first = as_alice.get(f"/jobs/{name}/attempts/0").json()
    assert first["jobStatus"]["attemptId"] == 0 and "isLatest" not in first
    assert as_alice.get(f"/jobs/{name}/job-attempts/1").json()["isLatest"] is True
    missing = as_alice.get(f"/jobs/{name}/attempts/7")
    assert missing.status_code == 404 and missing.json()["code"] == "NoJobError"
    assert as_alice.get(f"/jobs/{name}/job-attempts/healthz").json() == {"message": "ok"}


def test_a_task_retried_within_an_attempt_lists_each_try(
    as_alice: httpx.Client, jobs: dict[str, str]
) -> None:
    name = jobs["failing"]
    wait_for(as_alice, name)
    response = as_alice.get(f"/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts")
    assert response.status_code == 200
    body = response.json()
    assert (body["taskRole"], body["taskIndex"], body["jobAttemptId"]) == ("main", 0, 0)
    tries = body["attempts"]
    assert [(t["attemptId"], t["attemptState"], t["containerExitCode"]) for t in tries] == [
        (0, "FAILED", 255),
        (1, "FAILED", 255),
    ]
    assert tries[0]["containerId"] != tries[1]["containerId"]
    assert all(t["logs"].endswith(f"/attempts/{t['attemptId']}/logs") for t in tries)
    log = as_alice.get(as_alice.get(tries[1]["logs"]).json()["locations"][0]["uri"])
    assert log.text == "trying\n"
    unknown = as_alice.get(f"/jobs/{name}/attempts/0/taskRoles/nope/taskIndex/0/attempts")
    assert unknown.status_code == 404


def test_an_unknown_job_is_not_found(as_alice: httpx.Client) -> None:
    for path in ("/jobs/nobody~nothing", "/jobs/nothing/events", "/jobs/nobody~x/job-attempts"):
        response = as_alice.get(path)
        assert response.status_code == 404 and response.json()["code"] == "NoJobError", path
    config = as_alice.get("/jobs/nobody~nothing/config")
    assert config.status_code == 404 and config.json()["code"] == "NoJobConfigError"


# -- logs, config, tags, events -----------------------------------------------------------------


def log_locations(client: httpx.Client, job: dict[str, Any]) -> dict[str, str]:
    response = client.get(first_task(job)["containerLog"])
    assert response.status_code == 200, response.text
    return {location["name"]: location["uri"] for location in response.json()["locations"]}


def test_logs_are_read_by_stream_and_tail(
    as_alice: httpx.Client, as_bob: httpx.Client, jobs: dict[str, str]
) -> None:
    name = jobs["hello"]
    uris = log_locations(as_alice, wait_for(as_alice, name))
    assert set(uris) == {"stdout", "stderr", "all", "runtime"}
    assert all(uri.startswith("http://127.0.0.1:") for uri in uris.values())
    stdout = as_alice.get(uris["stdout"])
    assert stdout.headers["content-type"] == "text/plain; charset=utf-8"
    assert stdout.text == f"hello from {name}\n"
    assert as_alice.get(uris["stderr"]).text == "oops\n"
    assert "hello from" in as_alice.get(uris["all"]).text
    assert as_alice.get(uris["stdout"], params={"tail": 6}).text == f"{name[-5:]}\n"
    assert as_alice.get(uris["runtime"]).status_code == 200
    assert as_bob.get(uris["stdout"]).status_code == 403
    locations = as_bob.get(first_task(detail(as_bob, name))["containerLog"])
    assert locations.status_code == 403


def test_following_a_log_streams_it_until_the_task_ends(as_alice: httpx.Client) -> None:
    ticks = "for i in 0 1 2 3 4; do echo tick $i; sleep 0.4; done"
    name = submit(as_alice, job_yaml(unique("ticker"), [ticks]))
    job = wait_for(as_alice, name, {"RUNNING", "SUCCEEDED"})
    uri = log_locations(as_alice, job)["stdout"]
    received = ""
    state_at_first_tick = None
    with as_alice.stream("GET", uri, params={"follow": "true"}) as response:
        assert response.status_code == 200
        for text in response.iter_text():
            if state_at_first_tick is None and "tick 0" in text:
                state_at_first_tick = detail(as_alice, name)["jobStatus"]["state"]
            received += text
    assert state_at_first_tick == "RUNNING"
    assert received == "".join(f"tick {i}\n" for i in range(5))
    assert wait_for(as_alice, name, timeout=10)["jobStatus"]["state"] == "SUCCEEDED"


def test_the_config_is_the_submitted_yaml_with_secrets_masked(
    as_alice: httpx.Client, as_bob: httpx.Client, jobs: dict[str, str]
) -> None:
    name = jobs["secret"]
    response = as_alice.get(f"/jobs/{name}/config")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/yaml")
    assert "token: '******'" in response.text or 'token: "******"' in response.text
    assert SECRET not in response.text
    assert yaml.safe_load(response.text)["name"] == name.split("~")[1]
    assert as_bob.get(f"/jobs/{name}/config").status_code == 403
    job = wait_for(as_alice, name)
    assert job["jobStatus"]["state"] == "SUCCEEDED"
    assert as_alice.get(log_locations(as_alice, job)["stdout"]).text == "the token is set\n"


def test_tags_are_added_and_removed_by_the_owner(
    as_alice: httpx.Client, as_bob: httpx.Client, jobs: dict[str, str]
) -> None:
    name = jobs["hello"]
    tag = unique("tag")
    assert as_alice.put(f"/jobs/{name}/tag", json={"value": tag}).status_code == 200
    assert as_alice.put(f"/jobs/{name}/tag", json={"value": tag}).status_code == 200  # idempotent
    assert detail(as_alice, name)["tags"] == [tag]
    assert listing(as_alice, tagsContain=tag) == [name]
    assert as_bob.put(f"/jobs/{name}/tag", json={"value": "mine"}).status_code == 403
    assert as_bob.request("DELETE", f"/jobs/{name}/tag", json={"value": tag}).status_code == 403
    bad = as_alice.put(f"/jobs/{name}/tag", json={"value": "a,b"})
    assert bad.status_code == 400 and bad.json()["code"] == "InvalidParametersError"
    assert "body.value" in bad.json()["message"]  # the documented pattern refuses it
    assert as_alice.request("DELETE", f"/jobs/{name}/tag", json={"value": tag}).status_code == 200
    assert detail(as_alice, name)["tags"] == []
    gone = as_alice.request("DELETE", f"/jobs/{name}/tag", json={"value": tag})
    assert gone.status_code == 404 and gone.json()["code"] == "NoTagError"


def test_events_tell_the_story_of_a_job(as_alice: httpx.Client, jobs: dict[str, str]) -> None:
    wait_for(as_alice, jobs["hello"])
    events = as_alice.get(f"/jobs/{jobs['hello']}/events").json()
    reasons = [event["reason"] for event in events["data"]]
    assert events["totalCount"] == len(reasons)
    assert reasons[0] == "Submitted" and "Scheduled" in reasons and "TaskCompleted" in reasons
    completed = next(e for e in events["data"] if e["reason"] == "TaskCompleted")
    assert (completed["taskroleName"], completed["taskIndex"], completed["type"]) == (
        "main",
        0,
        "Normal",
    )
    assert completed["frameworkName"] == jobs["hello"] and completed["podUid"]
    assert datetime.fromisoformat(completed["lastTimestamp"]) <= datetime.now(UTC)
    submitted = events["data"][0]  # about the whole job: OpenPAI's fields, naming no task
    assert [submitted[key] for key in ("podUid", "taskroleName", "taskName", "taskIndex")] == [
        "",
        "",
        "",
        -1,
    ]
    wait_for(as_alice, jobs["failing"])
    warnings = as_alice.get(f"/jobs/{jobs['failing']}/events", params={"type": "Warning"}).json()
    assert warnings["totalCount"] >= 4
    assert {event["type"] for event in warnings["data"]} == {"Warning"}
    normal = as_alice.get(f"/jobs/{jobs['failing']}/events", params={"type": "Normal"}).json()
    assert {event["type"] for event in normal["data"]} == {"Normal"}


def test_jobs_stay_readable_while_another_writer_holds_the_database(
    pai_server: RunningServer, as_alice: httpx.Client
) -> None:
    """Reading jobs takes no write lock: a long write elsewhere (another PAI process, an
    administrator's migration) does not freeze the portal, the CLI or `pai wait`."""
    name = submit(as_alice, job_yaml(unique("read-under-write"), ["true"]))
    detail(as_alice, name)  # the token's last use is recorded now, not under the lock below
    outside = Database(pai_server.settings.database_url)
    try:
        with outside.session() as session:
            session.execute(text("SELECT 1"))  # begins the transaction: SQLite's write lock
            listed = as_alice.get("/jobs", params={"username": name.split("~")[0]}, timeout=5)
            shown = as_alice.get(f"/jobs/{name}", timeout=5)
            events = as_alice.get(f"/jobs/{name}/events", timeout=5)
    finally:
        outside.dispose()
    assert listed.status_code == 200, listed.text
    username, short_name = name.split("~")
    assert short_name in [job["name"] for job in listed.json()]
    assert (shown.json()["jobStatus"]["username"], shown.json()["name"]) == (username, short_name)
    assert events.status_code == 200, events.text


def submissions_counted(server: RunningServer) -> float:
    """`pai_job_submissions_total` of the platform's /metrics (open to loopback)."""
    metrics = httpx.get(f"{server.base_url}/metrics").text
    return next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("pai_job_submissions_total ")
    )


def test_submissions_are_answered_alike_whichever_way_they_come(pai_server: RunningServer) -> None:
    """A token's first request reads its bearer from the store and takes the `submit` route;
    once the bearer is remembered, submissions skip FastAPI's routing. Accepted jobs, refused
    job files, forged tokens and Basic credentials get the same answers either way, and every
    accepted job counts in /metrics."""
    account = Account.create(pai_server)
    counted = submissions_counted(pai_server)
    with pai_server.client(account.token) as client:
        accepted = [submit(client, job_yaml(unique("alike"), ["true"])) for _ in range(3)]
        broken = client.post(
            "/jobs", content=job_yaml(unique("broken"), ["true"], top="jobRetryCount: many")
        )
        application = client.post("/tokens/application").json()["token"]
    assert len(set(accepted)) == 3
    assert broken.status_code == 400
    assert broken.json()["code"] == "InvalidProtocolError"
    [problem] = broken.json()["problems"]
    assert (problem["path"], problem["line"]) == ("jobRetryCount", 4)
    with pai_server.client() as anonymous:
        forged = anonymous.post(
            "/jobs",
            content=job_yaml(unique("forged"), ["true"]),
            headers={"Authorization": f"Bearer {account.token[:-4]}AAAA"},
        )
        basic = anonymous.post(
            "/jobs",
            content=job_yaml(unique("basic"), ["true"]),
            headers=basic_auth(account.username, application),
        )
    assert (forged.status_code, forged.json()["code"]) == (401, "UnauthorizedUserError")
    assert basic.status_code == 202, basic.text
    assert submissions_counted(pai_server) == counted + 4
