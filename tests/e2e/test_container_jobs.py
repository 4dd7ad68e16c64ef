"""Jobs in containers of their images through a real `pai up`: PAI's parameter-server example,
its three tasks talking over TCP, and SSH sessions that open inside a task's container
(the image has neither an SSH server nor PAI)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest
import yaml

from e2e.pai_process import PaiUp, running
from e2e.test_interactive_ssh import JOB as SSH_JOB
from e2e.test_interactive_ssh import run_in_task, wait_for_ssh
from pai.executors.sandboxes.containers import ContainerSandbox
from pai.sdk import Client

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
PASSWORD = "containers-Password-1"


def in_image(job_text: str, image: str, registry_password: str) -> str:
    """The job with its image replaced by `image`, pulled with the password as a secret."""
    job = yaml.safe_load(job_text)
    for prerequisite in job["prerequisites"]:
        if prerequisite["type"] == "dockerimage":
            prerequisite["uri"] = image
            prerequisite["auth"] = {"username": "pai", "password": "<% $secrets.registry %>"}
    job["secrets"] = {"registry": registry_password}
    return yaml.safe_dump(job, sort_keys=False)


@pytest.fixture
def platform(tmp_path: Path, sandbox_env: dict[str, str]) -> Iterator[PaiUp]:
    with running(tmp_path / "home", {"PAI_ISOLATION": "container"}) as up:
        yield up


@pytest.fixture
def alice(platform: PaiUp) -> Iterator[Client]:
    with platform.client() as admin:
        admin.create_user("alice", PASSWORD)
    with Client.login(platform.url, "alice", PASSWORD) as client:
        yield client


def test_the_parameter_server_example_trains_across_containers(
    alice: Client, container_sandbox: ContainerSandbox, python_image: str
) -> None:
    job_text = in_image(
        (EXAMPLES / "ps-worker.yaml").read_text(), python_image, container_sandbox.password
    )

    alice.submit(job_text)
    job = alice.wait("ps-worker", timeout=180)

    assert job.state == "SUCCEEDED", job.job_status
    tasks = job.tasks()
    assert {task.isolation for _, task in tasks} == {"container"}
    log = alice.logs("ps-worker", role="ps", stream="stdout")
    assert "final parameters: [-0.9, -0.6]" in log  # both workers' three steps arrived


def wait_running(client: Client, name: str) -> None:
    deadline = time.monotonic() + 120
    while {task.task_state for _, task in client.job(name).tasks()} != {"RUNNING"}:
        assert time.monotonic() < deadline, client.job(name).job_status
        time.sleep(0.2)


def test_an_ssh_session_opens_inside_the_tasks_container_and_reaches_its_peer(
    alice: Client, container_sandbox: ContainerSandbox, python_image: str
) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    alice.add_ssh_key("laptop", key.export_public_key().decode())
    alice.submit(in_image(SSH_JOB, python_image, container_sandbox.password))
    wait_running(alice, "shell")  # a running task's SSH server listens
    info = wait_for_ssh(alice, "shell", tasks=2)
    task0 = info.container("worker", 0)
    known = asyncssh.import_known_hosts(f"[{task0.sshIp}]:{task0.sshPort} {info.hostPublicKey}\n")
    command = (
        ". /etc/os-release; echo $ID; "  # the image's system, not the node's
        'test "$PWD" = "$PAI_WORK_DIR" && echo in-work-dir; '
        "ssh -o BatchMode=yes worker-1 'echo peer $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'"
    )

    result = asyncio.run(run_in_task(task0, key, known, command))
    terminal = asyncio.run(run_in_task(task0, key, known, "tty && echo $TERM", term_type="xterm"))

    assert result.exit_status == 0, result.stderr
    assert str(result.stdout).splitlines() == ["debian", "in-work-dir", "peer 1"]
    assert str(terminal.stdout).split()[1:] == ["xterm"]
    assert str(terminal.stdout).startswith("/dev/pts/")  # a terminal inside the container
