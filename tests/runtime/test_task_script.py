"""The script a task runs: runtime plugins around the role's commands, secrets substituted."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pai.protocol import RuntimePlugin, parse_job
from pai.runtime.plugins import PluginError, build_task_script, task_script_for_role


def plugin(name: str, policy: str = "fail", **parameters: Any) -> RuntimePlugin:
    return RuntimePlugin(plugin=name, parameters=parameters, failure_policy=policy)


def run(
    script: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the script as a task does: bash, in the working directory."""
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_pre_commands_commands_then_post_commands_in_reverse(tmp_path: Path) -> None:
    script = build_task_script(
        ["echo train"],
        [
            plugin("cmd", preCommands=["echo setup-1"], postCommands=["echo teardown-1"]),
            plugin(
                "cmd",
                callbacks=[
                    {"event": "taskStarts", "commands": ["echo setup-2"]},
                    {"event": "taskSucceeds", "commands": ["echo teardown-2"]},
                ],
            ),
        ],
    )

    done = run(script, tmp_path)

    assert done.returncode == 0
    assert done.stdout.split() == ["setup-1", "setup-2", "train", "teardown-2", "teardown-1"]


def test_pre_commands_prepare_the_shell_of_the_commands(tmp_path: Path) -> None:
    script = build_task_script(
        ['echo "lr=$LEARNING_RATE"; exit 0'],
        [plugin("cmd", preCommands=["export LEARNING_RATE=0.1"], postCommands=["echo after"])],
    )

    done = run(script, tmp_path)

    # An `exit 0` in the commands still lets post-commands run.
    assert (done.returncode, done.stdout) == (0, "lr=0.1\nafter\n")


def test_post_commands_run_only_after_success(tmp_path: Path) -> None:
    script = build_task_script(["echo train", "exit 3"], [plugin("cmd", postCommands=["echo up"])])

    done = run(script, tmp_path)

    assert (done.returncode, done.stdout) == (3, "train\n")


def test_failure_policy_fail_stops_the_task_with_the_commands_code(tmp_path: Path) -> None:
    script = build_task_script(
        ["echo train"], [plugin("cmd", preCommands=["echo setup", "(exit 7)", "echo more"])]
    )

    done = run(script, tmp_path)

    assert (done.returncode, done.stdout) == (7, "setup\n")
    assert "pre-commands: a command failed with exit code 7; the task fails" in done.stderr


def test_failure_policy_ignore_carries_on(tmp_path: Path) -> None:
    script = build_task_script(
        ["echo train"], [plugin("cmd", "ignore", preCommands=["(exit 7)", "echo more"])]
    )

    done = run(script, tmp_path)

    assert (done.returncode, done.stdout) == (0, "more\ntrain\n")
    assert "exit code 7; ignored" in done.stderr


def test_secrets_are_substituted_in_commands_and_plugin_parameters(tmp_path: Path) -> None:
    script = build_task_script(
        ["echo key=<% $secrets.api_key %>"],
        [plugin("cmd", preCommands=["echo token=<% $secrets.token %>"])],
        {"api_key": "k-123", "token": "t-456"},
    )

    assert run(script, tmp_path).stdout == "token=t-456\nkey=k-123\n"


def test_errors_never_show_a_secret() -> None:
    bad = plugin("cmd", preCommands="echo <% $secrets.token %>")

    with pytest.raises(PluginError) as error:
        build_task_script(["true"], [bad], {"token": "t-456"})

    assert "t-456" not in str(error.value)
    assert "<% $secrets.token %>" in str(error.value)


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        (
            [plugin("teamwise_storage", storageConfigNames=["a"])],
            "'teamwise_storage' is not supported here; supported: cmd, git, ssh, tensorboard",
        ),
        ([plugin("ssh", jobssh="yes")], "#1 (ssh).parameters.jobssh: expected true or false"),
        ([plugin("ssh", sshbarrier=True)], "(ssh).parameters.sshbarrier: needs jobssh: true"),
        (
            [plugin("ssh", userssh={"type": "custom", "value": "ssh-rsa nonsense"})],
            "(ssh).parameters.userssh.value: not an SSH public key",
        ),
        ([plugin("ssh", sshd=True)], "(ssh).parameters: unknown parameter(s) sshd"),
        ([plugin("tensorboard", port=6006)], "(tensorboard).parameters.logdir: expected a mapping"),
        (
            [plugin("tensorboard", logdir={"run": "a"}, port="http")],
            "(tensorboard).parameters.port: expected a port number, got 'http'",
        ),
        (
            [plugin("cmd", preCommands=["a"], callbacks=[])],
            "#1 (cmd).parameters: use either callbacks or preCommands/postCommands",
        ),
        (
            [plugin("cmd", callbacks=[{"event": "taskEnds", "commands": ["a"]}])],
            "callbacks[0].event: expected taskStarts or taskSucceeds, got 'taskEnds'",
        ),
        ([plugin("cmd", preCommands="echo a")], "preCommands: expected a list"),
        ([plugin("git", options=["--depth=1"])], "repo_uri: a repository URI is required"),
    ],
)
def test_bad_plugin_configuration_is_rejected_with_where_and_why(
    plugins: list[RuntimePlugin], message: str
) -> None:
    with pytest.raises(PluginError) as error:
        build_task_script(["true"], plugins)

    assert message in str(error.value)


JOB = """
protocolVersion: 2
name: scripted
type: job
secrets:
  token: t-456
prerequisites:
  - {type: dockerimage, name: image, uri: python:3.11}
  - type: script
    name: setup
    plugin: com.microsoft.pai.runtimeplugin.cmd
    failurePolicy: ignore
    callbacks:
      - {event: taskStarts, commands: ["echo setup with <% $secrets.token %>", "false"]}
parameters:
  epochs: 3
taskRoles:
  trainer:
    dockerImage: image
    prerequisites: [setup]
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands:
      - echo train for <% $parameters.epochs %> epochs
extras:
  com.microsoft.pai.runtimeplugin:
    - plugin: cmd
      taskroles: [trainer]
      parameters: {postCommands: ["echo upload"]}
"""


def test_the_script_of_a_submitted_job(tmp_path: Path) -> None:
    script = task_script_for_role(parse_job(JOB), "trainer")

    done = run(script, tmp_path)

    assert (done.returncode, done.stdout) == (0, "setup with t-456\ntrain for 3 epochs\nupload\n")
    assert "exit code 1; ignored" in done.stderr


@pytest.fixture
def repository(tmp_path: Path, git_path: str) -> str:
    """A bare repository with one commit, reachable by a file:// URL (no network)."""
    bare, work = tmp_path / "origin.git", tmp_path / "seed"
    git = [git_path, "-c", "user.name=PAI Test", "-c", "user.email=test@pai.invalid"]
    git += ["-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "--quiet", "--bare", str(bare)], check=True)
    subprocess.run([*git, "init", "--quiet", str(work)], check=True)
    (work / "train.py").write_text("print('training from git')\n")
    subprocess.run([*git, "-C", str(work), "add", "train.py"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "--quiet", "-m", "first"], check=True)
    subprocess.run([*git, "-C", str(work), "push", "--quiet", str(bare), "HEAD:main"], check=True)
    return bare.as_uri()


def test_git_plugin_clones_before_the_commands(repository: str, tmp_path: Path) -> None:
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    script = build_task_script(
        ["python3 'code dir/train.py'"],
        [
            plugin(
                "git",
                repo_uri=repository,
                options=["--depth 1", "--branch=main"],
                clone_dir="code dir",
            )
        ],
    )

    done = run(script, task_dir)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "training from git\n"


def test_git_plugin_clones_into_the_work_dir_by_default(repository: str, tmp_path: Path) -> None:
    script = build_task_script(["ls code"], [plugin("git", repo_uri=repository)])

    done = run(script, tmp_path, env={"PAI_WORK_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})

    assert (done.returncode, done.stdout) == (0, "train.py\n")


def test_git_plugin_refuses_a_non_empty_clone_dir(repository: str, tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "keep.txt").write_text("mine")
    script = build_task_script(
        ["echo never"], [plugin("git", repo_uri=repository, clone_dir="code")]
    )

    done = run(script, tmp_path)

    assert done.returncode != 0
    assert done.stdout == ""
    assert "clone_dir code is not empty" in done.stderr
    assert (tmp_path / "code" / "keep.txt").read_text() == "mine"


def test_tensorboard_on_the_host_uses_the_tasks_python3_when_pais_is_out_of_its_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task user such as `nobody` cannot run a PAI installed under /root: TensorBoard then
    comes from the `python3` on the task's PATH (here this test's Python, which has it)."""
    tensorboard = pytest.importorskip("tensorboard")
    unrunnable = tmp_path / "root-only-python3"
    unrunnable.write_text("")  # there, but no one may run it
    monkeypatch.setattr(sys, "executable", str(unrunnable))
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    script = build_task_script(
        ['echo "tensorboard by $pai_tb_python, pid $!"'],
        [plugin("tensorboard", logdir={"run": "runs"})],
    )
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "PYTHONPATH": str(Path(tensorboard.__file__).parents[1]),
        "PAI_WORK_DIR": str(tmp_path),
        "PAI_CONTAINER_HOST_IP": "127.0.0.1",
        "PAI_CONTAINER_HOST_PORT": str(free_port()),
    }

    done = run(script, tmp_path, env)

    assert done.returncode == 0, done.stderr
    said, _, pid = done.stdout.strip().rpartition(", pid ")
    os.kill(int(pid), signal.SIGTERM)  # the TensorBoard the plugin started in the background
    assert said == "tensorboard by python3"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
