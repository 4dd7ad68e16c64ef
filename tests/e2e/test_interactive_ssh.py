"""SSH into the tasks of a job through a real `pai up`: the ssh runtime plugin's server in each
task, a user's key from their profile, password-less ssh between the job's tasks (OpenSSH's
client inside the task), and `pai ssh` as a user runs it."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncssh
import pytest

from cli.pai_runner import Pai, make_pai
from e2e.pai_process import PaiUp
from pai.executors.local import kill_processes_under
from pai.sdk import Client
from pai.sdk.errors import ForbiddenError
from pai.sdk.ssh import SshContainer, SshInfo
from server.harness import LOCAL_CLUSTER_FILE

pytestmark = pytest.mark.slow

JOB = """\
protocolVersion: 2
name: shell
type: job
prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]
taskRoles:
  worker:
    instances: 2
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [sleep 600]
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: ssh
      parameters: {jobssh: true, sshbarrier: true}
"""


class Interactive:
    """A running `pai up` with alice, her key in her profile and her ssh-enabled job."""

    def __init__(self, platform: PaiUp, directory: Path) -> None:
        self.platform = platform
        self.key_file = directory / "id_ed25519"
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(self.key_file)
        self.key_file.chmod(0o600)  # OpenSSH ignores a private key others may read
        self.key = key
        with platform.client() as admin:
            admin.create_user("alice", "alice-Password-1")
        self.alice = Client.login(platform.url, "alice", "alice-Password-1")
        self.alice.add_ssh_key("laptop", key.export_public_key().decode())
        self.alice.submit(JOB)
        self.info = wait_for_ssh(self.alice, "shell", tasks=2)
        self.pai = make_pai(directory / "cli")
        result = self.pai.run(
            "login", "--server", platform.url, "-u", "alice", "--password", "alice-Password-1"
        )
        assert result.returncode == 0, result.stderr

    def known_hosts(self, task: SshContainer) -> asyncssh.SSHKnownHosts:
        return asyncssh.import_known_hosts(
            f"[{task.sshIp}]:{task.sshPort} {self.info.hostPublicKey}\n"
        )


def wait_for_ssh(client: Client, name: str, tasks: int) -> SshInfo:
    """The job's SSH details once every task runs and its SSH server accepts connections (a
    task is listed when it runs; its server may still be starting on a loaded machine)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = client.ssh_info(name)
        if len(info.containers) == tasks and all(map(_accepts, info.containers)):
            return info
        time.sleep(0.2)
    raise AssertionError(f"the tasks of {name} never all ran: {client.job(name).job_status}")


def _accepts(task: SshContainer) -> bool:
    try:
        socket.create_connection((task.sshIp, int(task.sshPort)), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def interactive(
    tmp_path_factory: pytest.TempPathFactory, requirement: Callable[[bool, str], None]
) -> Iterator[Interactive]:
    # Inside the tasks (ssh worker-1) and for `pai ssh`.
    requirement(shutil.which("ssh") is not None, "OpenSSH's client is not installed (ssh)")
    directory = tmp_path_factory.mktemp("interactive-ssh")
    platform = PaiUp(directory / "home", LOCAL_CLUSTER_FILE, {"PAI_MONITOR_INTERVAL": "0.5"})
    platform.start()
    try:
        yield Interactive(platform, directory)
    finally:
        platform.stop()
        kill_processes_under(platform.home)


async def run_in_task(
    task: SshContainer,
    key: asyncssh.SSHKey,
    known: asyncssh.SSHKnownHosts,
    command: str,
    term_type: str | None = None,
) -> asyncssh.SSHCompletedProcess:
    async with asyncssh.connect(
        task.sshIp,
        int(task.sshPort),
        username="alice",
        client_keys=[key],
        known_hosts=known,
        agent_path=None,
        config=(),
    ) as connection:
        return await connection.run(command, check=False, term_type=term_type)


def test_a_key_from_the_profile_opens_task_0_which_reaches_task_1(
    interactive: Interactive,
) -> None:
    task0 = interactive.info.container("worker", 0)
    command = (
        'echo "$PAI_JOB_NAME $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX $PAI_CONTAINER_HOST_IP"; '
        'test "$PWD" = "$PAI_WORK_DIR" && echo in-work-dir; '
        "ssh -o BatchMode=yes worker-1 'echo peer $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'"
    )
    result = asyncio.run(
        run_in_task(task0, interactive.key, interactive.known_hosts(task0), command)
    )

    assert result.exit_status == 0, result.stderr
    lines = str(result.stdout).splitlines()
    assert lines == [f"alice~shell 0 {task0.sshIp}", "in-work-dir", "peer 1"], result.stderr


def test_a_key_not_in_the_profile_is_refused(interactive: Interactive) -> None:
    task0 = interactive.info.container("worker", 0)
    stranger = asyncssh.generate_private_key("ssh-ed25519")

    with pytest.raises(asyncssh.PermissionDenied):
        asyncio.run(run_in_task(task0, stranger, interactive.known_hosts(task0), "true"))


def test_pai_ssh_runs_a_command_and_exits_with_its_code(interactive: Interactive) -> None:
    pai: Pai = interactive.pai
    key = str(interactive.key_file)

    result = pai.run("ssh", "shell", "worker", "1", "-i", key, "--", "hostname; exit 7")

    assert result.returncode == 7, result.stderr
    assert result.stdout.strip() == subprocess.check_output(["hostname"], text=True).strip()


def test_the_ssh_info_needs_the_owner_or_an_admin(interactive: Interactive) -> None:
    with interactive.platform.client() as admin:
        admin.create_user("mallory", "mallory-Password-1")
        assert [task.taskIndex for task in admin.ssh_info("alice~shell").containers] == [0, 1]
    mallory = Client.login(interactive.platform.url, "mallory", "mallory-Password-1")
    with mallory, pytest.raises(ForbiddenError, match="only alice"):
        mallory.ssh_info("alice~shell")
    assert interactive.info.keyNames == ["laptop"]


def test_an_idle_shell_job_is_listed_as_idle_interactive(interactive: Interactive) -> None:
    # Idle is the latest usage sample's verdict: the task's SSH server may wake for a moment
    # and flip it on a loaded machine, so the listing is asked until it shows the job idle.
    deadline = time.monotonic() + 30
    while True:
        result = interactive.pai.run("jobs", "--interactive", "--idle")
        assert result.returncode == 0, result.stderr
        rows = [line for line in result.stdout.splitlines() if "alice~shell" in line]
        if rows:
            break
        assert time.monotonic() < deadline, interactive.alice.interactive_jobs()
        time.sleep(0.5)

    (row,) = rows
    assert "ssh" in row and "busy" not in row


def test_a_terminal_session_gets_a_terminal_of_its_own(interactive: Interactive) -> None:
    task1 = interactive.info.container("worker", 1)
    known = interactive.known_hosts(task1)
    command = "tty; echo $TERM $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX; exit 4"

    result = asyncio.run(run_in_task(task1, interactive.key, known, command, "xterm"))

    assert result.exit_status == 4
    lines = str(result.stdout).splitlines()
    assert lines[0].startswith("/dev/pts/") and lines[1] == "xterm 1"


def root_only_python(directory: Path) -> Path:
    """This virtualenv's Python behind a folder only root may enter, as a virtualenv made from
    a Python under /root (pyenv's, say) is: root runs PAI with it, `nobody` cannot run it."""
    hidden = directory / "root-only"
    hidden.mkdir(mode=0o700)
    venv = hidden / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(sys.executable)
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", venv / "pyvenv.cfg")
    return venv / "bin" / "python3"


def test_a_host_task_of_a_root_platform_is_reached_over_ssh_as_its_user(
    tmp_path: Path, requirement: Callable[[bool, str], None]
) -> None:
    requirement(os.geteuid() == 0, "a platform that runs as root runs host tasks as nobody")
    requirement(shutil.which("ssh") is not None, "OpenSSH's client is not installed (ssh)")
    python = root_only_python(tmp_path)
    env = {"PAI_ISOLATION": "host", "PAI_TASK_USER": "nobody"}
    platform = PaiUp(tmp_path / "home", LOCAL_CLUSTER_FILE, env, python=python)
    platform.start()
    try:
        interactive = Interactive(platform, tmp_path)
        task0 = interactive.info.container("worker", 0)
        command = (
            "id -un; "
            'test "$PWD" = "$PAI_WORK_DIR" && echo in-work-dir; '
            f"cat {platform.home}/secret.key >/dev/null 2>&1 && echo key: READ "
            "|| echo key: refused; "
            "ssh -o BatchMode=yes worker-1 "
            "'id -un; echo peer $PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX'"
        )

        result = asyncio.run(
            run_in_task(task0, interactive.key, interactive.known_hosts(task0), command)
        )

        assert result.exit_status == 0, result.stderr
        lines = str(result.stdout).splitlines()
        assert lines == ["nobody", "in-work-dir", "key: refused", "nobody", "peer 1"], result
    finally:
        platform.stop()
        kill_processes_under(platform.home)
