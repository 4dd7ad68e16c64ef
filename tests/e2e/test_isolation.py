"""What an ordinary user's job can reach, through a real `pai up` run as root: neither PAI's
home, its database nor its secret key; in containers, nor another job's processes or files.

The job an attacker would write reads PAI's database and key (their paths are plain to see in
`ps` on the host), lists PAI's home, and tries another job's working directory and processes.
It runs once in containers of a busybox image pulled from a registry with a password, and once
on the host (no container runtime), where PAI runs it as `nobody`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from container_images import RuntimeConfiguration
from e2e.pai_process import PaiUp, running
from pai.executors.sandboxes.containers import ContainerSandbox
from pai.sdk import Client
from pai.sdk.errors import NotFoundError

pytestmark = pytest.mark.slow
PASSWORD = "isolation-Password-1"
MARKER = "4242.125"  # alice's task sleeps this long: bob looks for it by its command line


def job_text(name: str, image: str, registry_password: str, commands: list[str]) -> str:
    lines = "\n".join(f"      - {command!r}" for command in commands)
    return (
        f"protocolVersion: 2\nname: {name}\ntype: job\n"
        "prerequisites:\n"
        f"  - {{type: dockerimage, name: image, uri: '{image}',\n"
        "     auth: {username: pai, password: '<% $secrets.registry %>'}}\n"
        f"secrets: {{registry: '{registry_password}'}}\n"
        "taskRoles:\n  main:\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}\n"
        f"    commands:\n{lines}\n"
    )


def snooping(home: Path, neighbour_work: Path) -> list[str]:
    """Everything an attacker's job tries, each line saying what it got."""
    return [
        f"cat {home}/pai.db >/dev/null && echo 'database: READ' || echo 'database: refused'",
        f"cat {home}/secret.key >/dev/null && echo 'key: READ' || echo 'key: refused'",
        f"ls {home} 2>/dev/null | grep -qx pai.db && echo 'home: LISTED' || echo 'home: refused'",
        f"cat {neighbour_work}/private.txt && echo 'neighbour files: READ'"
        " || echo 'neighbour files: refused'",
        f"ps -eo pid,args | grep -v grep | grep -q {MARKER} && echo 'neighbour processes: SEEN'"
        " || echo 'neighbour processes: unseen'",
        "ps -eo args | grep -v grep | grep -q 'pai up' && echo 'platform: SEEN'"
        " || echo 'platform: unseen'",
    ]


class Users:
    """alice and bob, ordinary users of one `pai up`."""

    def __init__(self, platform: PaiUp) -> None:
        with platform.client() as admin:
            for name in ("alice", "bob"):
                admin.create_user(name, PASSWORD)
        self.alice = Client.login(platform.url, "alice", PASSWORD)
        self.bob = Client.login(platform.url, "bob", PASSWORD)

    def close(self) -> None:
        self.alice.close()
        self.bob.close()


@pytest.fixture
def in_containers(
    tmp_path: Path, sandbox_env: dict[str, str], requirement: Callable[[bool, str], None]
) -> Iterator[PaiUp]:
    requirement(os.geteuid() == 0, "the isolation tests run PAI as root, as on a server")
    with running(tmp_path / "home", {"PAI_ISOLATION": "container"}) as platform:
        yield platform


@pytest.fixture
def on_the_host(tmp_path: Path, requirement: Callable[[bool, str], None]) -> Iterator[PaiUp]:
    requirement(os.geteuid() == 0, "the isolation tests run PAI as root, as on a server")
    with running(tmp_path / "home", {"PAI_ISOLATION": "host", "PAI_TASK_USER": "nobody"}) as up:
        yield up


def test_a_job_in_a_container_reaches_nothing_of_the_platform_or_other_jobs(
    in_containers: PaiUp, container_sandbox: ContainerSandbox, busybox_image: str
) -> None:
    users = Users(in_containers)
    home = in_containers.home
    try:
        users.alice.submit(
            job_text(
                "neighbour",
                busybox_image,
                container_sandbox.password,
                ["echo 'alice private data' > private.txt", "echo ready", f"sleep {MARKER}"],
            )
        )
        neighbour_work = wait_ready(users.alice, "neighbour", home)
        users.bob.submit(
            job_text(
                "snoop", busybox_image, container_sandbox.password, snooping(home, neighbour_work)
            )
        )
        job = users.bob.wait("snoop", timeout=120)
        output = users.bob.logs("snoop", stream="stdout").splitlines()

        assert job.state == "SUCCEEDED", job
        assert output == [
            "database: refused",
            "key: refused",
            "home: refused",
            "neighbour files: refused",
            "neighbour processes: unseen",
            "platform: unseen",
        ]
        task = job.tasks()[0][1]
        assert (task.isolation, task.docker_image) == ("container", busybox_image)
        assert users.alice.job("neighbour").state == "RUNNING"  # untouched
        said = in_containers.output.read_text()
        assert "tasks run in containers of their jobs' images (podman" in said
    finally:
        users.close()


def test_a_host_job_of_a_root_platform_cannot_read_its_database_or_key(on_the_host: PaiUp) -> None:
    users = Users(on_the_host)
    home = on_the_host.home
    try:
        users.bob.submit(
            job_text("snoop", "busybox:1", "unused", [*snooping(home, home)[:3], "id -un"])
        )
        job = users.bob.wait("snoop", timeout=120)
        output = users.bob.logs("snoop", stream="stdout").splitlines()

        assert job.state == "SUCCEEDED", job
        assert output == ["database: refused", "key: refused", "home: refused", "nobody"]
        assert job.tasks()[0][1].isolation == "host"
        said = on_the_host.output.read_text()
        assert "tasks run directly on the host as user nobody" in said
    finally:
        users.close()


def test_a_wrong_registry_password_fails_with_254_and_is_kept_nowhere(
    in_containers: PaiUp, container_sandbox: ContainerSandbox, busybox_image: str
) -> None:
    container_sandbox.remove_image(busybox_image)  # so that it must be pulled
    wrong = "Wrong-Registry-Pass-8c1d"
    seen_in_ps = PsWatch(wrong)
    users = Users(in_containers)
    try:
        with seen_in_ps:
            users.bob.submit(job_text("refused", busybox_image, wrong, ["echo never"]))
            job = users.bob.wait("refused", timeout=120)
        task = job.tasks()[0][1]

        assert (job.state, job.job_status.app_exit_code) == ("FAILED", 254)
        assert job.job_status.retries == 0  # permanent: not retried
        assert busybox_image in (task.container_exit_diagnostics or "")
        assert "unauthorized" in (task.container_exit_diagnostics or "")
        events = " ".join(event.message for event in users.bob.events("refused"))
        assert wrong not in events
        assert wrong not in users.bob.job_config("refused")
        assert wrong not in users.bob.logs("refused", stream="all")
        assert not seen_in_ps.seen
        stored = subprocess.run(
            ["grep", "-rl", "--binary-files=text", wrong, str(in_containers.home)],
            capture_output=True,
            text=True,
        )
        assert stored.stdout == ""  # not in the database, a log, or a task's files
    finally:
        users.close()


def wait_ready(client: Client, name: str, home: Path) -> Path:
    """Wait until the job's task says `ready`; its working directory on the node."""
    deadline = time.monotonic() + 120
    while not _logged(client, name, "ready"):
        assert time.monotonic() < deadline, client.job(name)
        time.sleep(0.2)
    found = sorted(home.glob(f"jobs/*~{name}/*/work"))
    assert found, "the task's working directory"
    return found[-1]


def _logged(client: Client, name: str, text: str) -> bool:
    try:
        return text in client.logs(name)
    except NotFoundError:  # not started yet
        return False


class PsWatch:
    """Whether `secret` shows in any process's command line while the block runs."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.seen = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> PsWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.is_set():
            listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            self.seen = self.seen or self.secret in listing
            time.sleep(0.02)


def test_nodes_without_a_runtime_take_no_tasks_when_containers_are_required(
    tmp_path: Path, requirement: Callable[[bool, str], None]
) -> None:
    requirement(os.geteuid() == 0, "the isolation tests run PAI as root, as on a server")
    without_podman = str(Path(sys.executable).parent)  # PAI's own tools, and no podman
    env = {"PAI_ISOLATION": "container", "PATH": without_podman}
    with running(tmp_path / "home", env) as platform, platform.client() as client:
        client.submit(job_text("waits", "busybox:1", "unused", ["echo never"]))
        time.sleep(2)
        job = client.job("waits")
        nodes = client.nodes()
        said = platform.output.read_text()

    assert job.state == "WAITING"
    assert {node.engine_state for node in nodes} == {"bad"}
    assert all("podman is not installed" in node.engine_message for node in nodes)
    assert "this node takes no tasks: PAI_ISOLATION=container, but podman" in said


def test_a_runtime_that_cannot_start_a_container_keeps_tasks_off_the_node_and_says_why(
    tmp_path: Path,
    container_sandbox: ContainerSandbox,
    sandbox_env: dict[str, str],
    busybox_image: str,
    requirement: Callable[[bool, str], None],
) -> None:
    requirement(os.geteuid() == 0, "the isolation tests run PAI as root, as on a server")
    configuration = RuntimeConfiguration(container_sandbox, tmp_path / "containers.conf")
    configuration.fails()
    env = {"PAI_ISOLATION": "container", "CONTAINERS_CONF": str(configuration.path)}
    with running(tmp_path / "home", env) as platform, platform.client() as client:
        client.submit(job_text("waits", busybox_image, container_sandbox.password, ["true"]))
        time.sleep(2)
        job = client.job("waits")
        nodes = client.nodes()
        cluster = platform.admin_cli(tmp_path / "cli").run("cluster")
        said = platform.output.read_text()

    assert job.state == "WAITING" and job.job_status.retries == 0
    assert {node.engine_state for node in nodes} == {"bad"}
    runtime_says = "cannot start a container: container create failed"
    assert all(runtime_says in node.engine_message for node in nodes)
    assert runtime_says in " ".join(cluster.stdout.split()), cluster.stdout
    assert "this node takes no tasks while podman" in said
