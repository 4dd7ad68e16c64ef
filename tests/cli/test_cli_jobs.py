"""Jobs with the `pai` command against a real server running real tasks.

These need the jobs API; without it they skip (and fail under PAI_TEST_STRICT=1).
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pai_runner import Pai, make_pai, single_error

from sdk.jobs_api import command_job, example, unique
from server.harness import Account, RunningServer

pytestmark = pytest.mark.slow
WAIT_SECONDS = 120.0


@pytest.fixture(scope="module")
def user_pai(jobs_server: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Pai:
    """`pai` logged in as a plain user, for the whole module."""
    account = Account.create(jobs_server)
    pai = make_pai(tmp_path_factory.mktemp("user"))
    pai.login(jobs_server, account.username, account.password)
    return pai


@pytest.fixture(scope="module")
def api(user_pai: Pai, jobs_server: RunningServer) -> Iterator[httpx.Client]:
    """The API as the same user, to watch what the commands did."""
    config = json.loads(user_pai.config.read_text())
    with jobs_server.client(config["servers"][jobs_server.base_url]["token"]) as client:
        yield client


def user_of(pai: Pai) -> str:
    config = json.loads(pai.config.read_text())
    username: str = config["servers"][config["server"]]["username"]
    return username


def job_file(directory: Path, text: str) -> str:
    path = directory / f"{unique('job')}.yaml"
    path.write_text(text)
    return str(path)


def wait_until(api: httpx.Client, full_name: str, done: Callable[[str], bool]) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while not done(state := api.get(f"/jobs/{full_name}").json()["jobStatus"]["state"]):
        assert time.monotonic() < deadline, f"{full_name} is still {state}"
        time.sleep(0.2)
    return state


@pytest.fixture(scope="module")
def hello(user_pai: Pai, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The hello-world example, submitted and run to its end once for the module: its name."""
    name, text = example("hello-world.yaml")
    result = user_pai.run("submit", job_file(tmp_path_factory.mktemp("hello"), text), "--wait")
    assert result.returncode == 0, result.stderr
    return name


@pytest.mark.parametrize(
    ("file_name", "options", "role", "expected"),
    [
        ("hello-world.yaml", [], "main", "Hello from task main/0"),
        ("ps-worker.yaml", [], "ps", "final parameters:"),
        ("parameters-secrets-deployment.yaml", ["-p", "epochs=2"], "train", "epoch 1: weight"),
        ("opportunistic.yaml", [], "sweep", "task 0 trial 4: score 16"),
    ],
)
def test_each_example_runs_to_success(
    user_pai: Pai, tmp_path: Path, file_name: str, options: list[str], role: str, expected: str
) -> None:
    name, text = example(file_name)
    full_name = f"{user_of(user_pai)}~{name}"

    submitted = user_pai.run("submit", job_file(tmp_path, text), *options, "--wait")
    logs = user_pai.run("logs", name, "--role", role, "--stream", "stdout")

    assert submitted.returncode == 0, submitted.stderr + logs.stdout
    assert submitted.stdout.startswith(f"{full_name} SUCCEEDED after ")
    assert f"Submitted {full_name}." in submitted.stderr
    assert expected in logs.stdout


def test_parameters_reach_the_commands(user_pai: Pai, tmp_path: Path) -> None:
    name, text = example("parameters-secrets-deployment.yaml")

    user_pai.run("submit", job_file(tmp_path, text), "-p", "epochs=2", "--wait")
    output = user_pai.run("logs", name, "--stream", "stdout").stdout

    assert "training for 2 epochs" in output
    assert "epoch 2:" not in output


def test_an_invalid_file_is_reported_where_it_is_wrong_and_not_sent(
    user_pai: Pai, api: httpx.Client, tmp_path: Path
) -> None:
    name = unique("bad")
    path = job_file(tmp_path, command_job(name, "true").replace("cpu: 1", "cpu: one"))

    result = user_pai.run("submit", path)

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{path}:9:32: taskRoles.main.resourcePerInstance.cpu: must be an integer ≥ 1, got 'one'",
        f"error: {path} is not a valid job (1 problem); nothing was submitted",
    ]
    assert api.get(f"/jobs/{user_of(user_pai)}~{name}").status_code == 404


def test_an_undeclared_parameter_is_one_line(user_pai: Pai, tmp_path: Path) -> None:
    _, text = example("hello-world.yaml")

    result = user_pai.run("submit", job_file(tmp_path, text), "-p", "epochs=2")

    assert single_error(result) == (
        "error: the job declares no parameter 'epochs' (declared: none)"
    )


def test_a_long_job_is_stopped(user_pai: Pai, api: httpx.Client, tmp_path: Path) -> None:
    name = unique("sleeper")
    full_name = f"{user_of(user_pai)}~{name}"
    submitted = user_pai.run("submit", job_file(tmp_path, command_job(name, "sleep 300")))
    assert submitted.stdout == f"Submitted {full_name}.\n"
    wait_until(api, full_name, lambda state: state == "RUNNING")

    stopped = user_pai.run("stop", name)
    waited = user_pai.run("wait", name)

    assert stopped.returncode == 0, stopped.stderr
    assert waited.returncode == 2, waited.stderr
    assert waited.stdout.startswith(f"{full_name} STOPPED")


def test_wait_times_out_with_exit_code_3(user_pai: Pai, api: httpx.Client, tmp_path: Path) -> None:
    name = unique("slow")
    user_pai.run("submit", job_file(tmp_path, command_job(name, "sleep 300")))

    result = user_pai.run("wait", name, "--timeout", "1")

    assert result.returncode == 3
    assert result.stderr.splitlines()[-1].startswith(f"error: job '{user_of(user_pai)}~{name}'")
    user_pai.run("stop", name)


def test_an_interrupted_wait_exits_130(user_pai: Pai, api: httpx.Client, tmp_path: Path) -> None:
    name = unique("interrupted")
    user_pai.run("submit", job_file(tmp_path, command_job(name, "sleep 300")))
    waiting = user_pai.start("wait", name)
    assert waiting.stderr is not None
    assert name in waiting.stderr.readline()  # the first progress line: it is in its loop

    waiting.send_signal(signal.SIGINT)

    assert waiting.wait(timeout=WAIT_SECONDS) == 130
    assert "Traceback" not in waiting.stderr.read()
    user_pai.run("stop", name)


def test_a_failed_job_explains_its_exit_code(user_pai: Pai, tmp_path: Path) -> None:
    name = unique("fails")

    submitted = user_pai.run("submit", job_file(tmp_path, command_job(name, "exit 3")), "--wait")
    shown = user_pai.run("job", name)

    assert submitted.returncode == 1
    assert re.search(r" FAILED after .*, exit \d+ \(\w+\)", submitted.stdout), submitted.stdout
    assert shown.returncode == 0
    assert "FAILED" in shown.stdout
    assert re.search(r"exit \d+ \(\w+\)", shown.stdout)  # the code with its phrase
    assert "reason: " in shown.stdout


def test_a_syntax_error_shows_the_offending_source_line(user_pai: Pai, tmp_path: Path) -> None:
    name = unique("syntax")
    command = "python3 -c 'def broken(:'"

    submitted = user_pai.run("submit", job_file(tmp_path, command_job(name, command)), "--wait")
    shown = user_pai.run("job", name)

    assert submitted.returncode == 1
    assert "exit 231 (ContainerSyntaxError)" in shown.stdout
    assert "def broken(:" in shown.stdout  # what the solution "fix the code at the line" means
    assert "SyntaxError" in shown.stdout


def test_logs_follow_the_task_as_it_writes(user_pai: Pai, tmp_path: Path) -> None:
    name = unique("talk")
    job = command_job(name, "for i in 1 2 3; do echo line-$i; sleep 0.5; done")
    user_pai.run("submit", job_file(tmp_path, job))

    result = user_pai.run("logs", name, "-f", "--stream", "stdout")

    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("line-")] == [
        "line-1",
        "line-2",
        "line-3",
    ]


def test_the_job_tree_shows_roles_and_tasks(user_pai: Pai, hello: str) -> None:
    result = user_pai.run("job", hello)
    detail = json.loads(user_pai.run("job", hello, "--json").stdout)

    assert result.returncode == 0, result.stderr
    assert f"{user_of(user_pai)}~{hello}  SUCCEEDED" in result.stdout
    assert "role main (1 task)" in result.stdout
    assert "task 0  SUCCEEDED  node " in result.stdout
    assert "on the host (image python:3.11 not used)" in result.stdout  # no container runtime
    assert "retries 0 (user 0, platform 0, resource 0)" in result.stdout
    assert detail["name"] == hello
    assert detail["taskRoles"]["main"]["taskStatuses"][0]["taskState"] == "SUCCEEDED"


def test_listing_filters_jobs(user_pai: Pai, hello: str) -> None:
    def names(*options: str) -> list[str]:
        result = user_pai.run("jobs", "--json", *options)
        assert result.returncode == 0, result.stderr
        return [job["name"] for job in json.loads(result.stdout)]

    assert hello in names()
    assert hello in names("--state", "succeeded")
    assert hello not in names("--state", "RUNNING,WAITING")
    assert hello in names("--vc", "default", "--keyword", hello)
    assert hello not in names("--user", unique("someone"))
    assert hello in names("--all")
    assert hello in user_pai.run("jobs").stdout


def test_tags_and_events(user_pai: Pai, hello: str) -> None:
    tag = unique("tag")

    tagged = user_pai.run("tag", hello, tag)
    assert tagged.returncode == 0, tagged.stderr
    assert tag in json.loads(user_pai.run("job", hello, "--json").stdout)["tags"]
    assert user_pai.run("untag", hello, tag).returncode == 0
    assert "(NoTagError)" in single_error(user_pai.run("untag", hello, tag))
    events = user_pai.run("events", hello, "--json")
    assert events.returncode == 0, events.stderr
    assert isinstance(json.loads(events.stdout), list)


def test_an_unknown_job_is_one_line(user_pai: Pai) -> None:
    name = unique("missing")

    line = single_error(user_pai.run("job", name))

    assert line.startswith("error: ") and line.endswith("(NoJobError)")
    assert f"{user_of(user_pai)}~{name}" in line


def test_a_user_cannot_submit_outside_her_groups_vcs(
    jobs_server: RunningServer, tmp_path: Path
) -> None:
    admin = make_pai(tmp_path / "admin")
    admin.login(jobs_server, jobs_server.admin.username, jobs_server.admin.password)
    assert "research" in json.loads(admin.run("vc", "--json").stdout)  # the example cluster's
    username = unique("grace")
    created = admin.run("user", "create", username, "--password", "password1")
    assert created.returncode == 0, created.stderr
    grace = make_pai(tmp_path / "grace")
    grace.login(jobs_server, username, "password1")
    path = job_file(tmp_path, command_job(unique("outside"), "true"))

    result = grace.run("submit", path, "--vc", "research")

    assert single_error(result).endswith("(ForbiddenUserError)")


def test_the_cluster_is_shown(user_pai: Pai) -> None:
    vcs = user_pai.run("vc")
    cluster = json.loads(user_pai.run("cluster", "--json").stdout)

    assert vcs.returncode == 0, vcs.stderr
    assert "default" in vcs.stdout
    assert "default" in cluster["virtualClusters"]
    assert cluster["nodes"] and all("name" in node for node in cluster["nodes"])
    assert user_pai.run("cluster").returncode == 0
