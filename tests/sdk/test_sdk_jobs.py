"""Jobs through the SDK against a real server running real tasks.

These need the jobs API; without it they skip (and fail under PAI_TEST_STRICT=1).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from pai.sdk import (
    Client,
    ConflictError,
    ForbiddenError,
    InvalidArgumentError,
    InvalidProtocolError,
    JobDetail,
    NotFoundError,
    WaitTimeoutError,
)
from sdk.jobs_api import command_job, example, unique
from server.harness import Account, RunningServer

pytestmark = pytest.mark.slow
WAIT_SECONDS = 120.0
POLL = 0.2


@pytest.fixture(scope="module")
def client(jobs_server: RunningServer) -> Iterator[Client]:
    account = Account.create(jobs_server)
    with Client(jobs_server.base_url, account.token) as client:
        yield client


@pytest.fixture(scope="module")
def hello(client: Client) -> JobDetail:
    """The hello-world example, run to its end once for the module."""
    name, text = example("hello-world.yaml")
    submitted = client.submit(text)
    assert submitted.name == f"{client.username}~{name}"
    return client.wait(name, timeout=WAIT_SECONDS, poll=POLL)


def running(client: Client, name: str) -> JobDetail:
    """Wait until the job runs (it may have to be scheduled first)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while (job := client.job(name)).state != "RUNNING":
        assert not job.finished, f"{name} ended as {job.state} before running"
        assert time.monotonic() < deadline, f"{name} is still {job.state}"
        time.sleep(POLL)
    return job


def test_hello_world_succeeds_and_says_hello(client: Client, hello: JobDetail) -> None:
    assert hello.state == "SUCCEEDED"
    assert hello.job_status.app_exit_code == 0
    ((role, task),) = hello.tasks()
    assert (role, task.task_state, task.container_exit_code) == ("main", "SUCCEEDED", 0)
    assert "Hello from task main/0" in client.logs(hello.name, stream="stdout")


def test_wait_reports_each_change_until_the_end(client: Client) -> None:
    name = unique("steps")
    client.submit(command_job(name, "sleep 1", "echo done"))
    seen: list[str] = []

    job = client.wait(
        name, timeout=WAIT_SECONDS, poll=POLL, on_update=lambda update: seen.append(update.state)
    )

    assert job.state == "SUCCEEDED"
    assert "RUNNING" in seen
    assert seen[-1] == "SUCCEEDED" and seen.count("SUCCEEDED") == 1


def test_follow_logs_yields_lines_as_they_are_written(client: Client) -> None:
    name = unique("talk")
    client.submit(command_job(name, "for i in 1 2 3; do echo line-$i; sleep 0.5; done"))

    lines = list(client.follow_logs(name, stream="stdout", poll=POLL))

    assert [line for line in lines if line.startswith("line-")] == ["line-1", "line-2", "line-3"]
    assert client.wait(name, timeout=WAIT_SECONDS, poll=POLL).state == "SUCCEEDED"


def test_a_stopped_job_ends_as_stopped(client: Client) -> None:
    name = unique("sleeper")
    client.submit(command_job(name, "sleep 300"))
    running(client, name)

    client.stop(name)

    assert client.wait(name, timeout=WAIT_SECONDS, poll=POLL).state == "STOPPED"


def test_wait_gives_up_at_the_timeout_with_the_last_state(client: Client) -> None:
    name = unique("slow")
    client.submit(command_job(name, "sleep 300"))

    with pytest.raises(WaitTimeoutError) as caught:
        client.wait(name, timeout=0.5, poll=0.1)

    assert caught.value.job.state in ("WAITING", "RUNNING")
    client.stop(name)


def test_a_failed_job_explains_its_exit_code(client: Client) -> None:
    name = unique("fails")
    client.submit(command_job(name, "exit 3"))

    job = client.wait(name, timeout=WAIT_SECONDS, poll=POLL)

    assert job.state == "FAILED"
    ((_, task),) = job.tasks()
    assert task.container_exit_code not in (None, 0)
    spec = task.container_exit_spec
    assert spec is not None and spec.code == task.container_exit_code and spec.phrase
    assert job.job_status.app_exit_code == task.container_exit_code


def test_parameters_override_the_declared_ones(client: Client) -> None:
    name, text = example("parameters-secrets-deployment.yaml")

    client.submit(text, parameters={"epochs": "2"})
    job = client.wait(name, timeout=WAIT_SECONDS, poll=POLL)

    output = client.logs(name, stream="stdout")
    assert job.state == "SUCCEEDED", output
    assert "training for 2 epochs" in output
    assert "epoch 1:" in output and "epoch 2:" not in output
    config = client.job_config(name)
    assert "******" in config and "change-me-before-submitting" not in config


def test_listing_filters_by_user_state_and_keyword(client: Client, hello: JobDetail) -> None:
    mine = client.jobs(username=client.username)
    succeeded = client.jobs(username=client.username, state="SUCCEEDED")

    assert hello.name in [job.name for job in mine]
    assert all(job.state == "SUCCEEDED" for job in succeeded)
    assert hello.name in [job.name for job in succeeded]
    assert [job.name for job in client.jobs(keyword=hello.name)] == [hello.name]
    assert client.jobs(username=unique("nobody")) == []


def test_tags_are_added_and_removed(client: Client, hello: JobDetail) -> None:
    tag = unique("tag")

    client.tag(hello.name, tag)
    assert tag in client.job(hello.name).tags
    assert [job.name for job in client.jobs(tags_contain=tag)] == [hello.name]

    client.untag(hello.name, tag)
    assert tag not in client.job(hello.name).tags
    with pytest.raises(NotFoundError) as caught:
        client.untag(hello.name, tag)
    assert caught.value.code == "NoTagError"


def test_attempts_describe_the_run(client: Client, hello: JobDetail) -> None:
    attempts = client.job_attempts(hello.name)
    task_attempts = client.task_attempts(hello.name, "main", 0)

    latest = [attempt for attempt in attempts if attempt.is_latest]
    assert len(latest) == 1 and latest[0].state == "SUCCEEDED"
    assert task_attempts.task_role == "main"
    assert task_attempts.attempts[-1].attempt_id == hello.tasks()[0][1].attempt_id
    assert all(event.taskrole_name in ("", "main") for event in client.events(hello.name))


def test_logs_of_a_multi_role_job_need_a_role(client: Client) -> None:
    name, text = example("ps-worker.yaml")
    client.submit(text)
    job = client.wait(name, timeout=WAIT_SECONDS, poll=POLL)
    assert job.state == "SUCCEEDED"

    with pytest.raises(InvalidArgumentError, match="has roles ps, worker"):
        client.logs(name)
    assert "final parameters" in client.logs(name, role="ps", stream="stdout")
    assert "worker 1 step 2" in client.logs(name, role="worker", index=1, stream="stdout")


def test_an_invalid_job_is_refused_with_located_problems(client: Client) -> None:
    text = command_job(unique("bad"), "true").replace("cpu: 1", "cpu: one")

    with pytest.raises(InvalidProtocolError) as caught:
        client.submit(text)

    (problem,) = caught.value.problems
    assert problem.path == "taskRoles.main.resourcePerInstance.cpu"
    assert problem.line == 9


def test_a_name_is_used_once_per_user(client: Client) -> None:
    name = unique("twice")
    client.submit(command_job(name, "true"))

    with pytest.raises(ConflictError):
        client.submit(command_job(name, "true"))


def test_an_unknown_job_is_not_found(client: Client) -> None:
    with pytest.raises(NotFoundError) as caught:
        client.job(unique("missing"))

    assert caught.value.code == "NoJobError"


def test_a_user_cannot_submit_outside_her_groups_vcs(
    jobs_server: RunningServer, client: Client
) -> None:
    username = unique("frank")
    jobs_server.create_user(username, password="password1")
    frank = Client.login(jobs_server.base_url, username, "password1")
    assert "research" in client.virtual_clusters()  # the example cluster has it

    with frank, pytest.raises(ForbiddenError) as caught:
        frank.submit(command_job(unique("outside"), "true", vc="research"))

    assert caught.value.code == "ForbiddenUserError"


def test_the_cluster_is_described(client: Client) -> None:
    clusters = client.virtual_clusters()
    nodes = client.nodes()

    assert "default" in clusters
    assert client.virtual_cluster("default").cells == clusters["default"].cells
    assert nodes and all(node.leaves.total >= node.leaves.used for node in nodes)
    assert client.sku_types()
    with pytest.raises(NotFoundError):
        client.virtual_cluster("no_such_vc")
