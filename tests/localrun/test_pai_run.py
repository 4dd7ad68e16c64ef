"""`pai run` on the host (PAI_ISOLATION=host), as a user runs it: the installed command in a
subprocess, no server, real tasks talking over TCP on their loopback addresses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cli.pai_runner import WITH_DEFAULT_SIGINT, pai_command

COMMAND_TIMEOUT = 60.0

# Every role waits for all tasks (-1): a role whose tasks all succeeded would otherwise end the
# job, as on a cluster, before the others have spoken.
JOB = """\
protocolVersion: 2
name: talk
type: job
parameters:
  greeting: hello
  code: "0"
prerequisites:
  - {name: image, type: dockerimage, uri: "python:3.11"}
taskRoles:
  srv:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0, ports: {talk: 1}}
    completion: {minSucceededInstances: -1}
    commands:
      - >-
        python3 -c "import os, socket;
        s = socket.create_server((os.environ['PAI_CONTAINER_HOST_IP'],
        int(os.environ['PAI_PORT_LIST_srv_0_talk'])));
        print('listening', flush=True); c, _ = s.accept();
        print('srv got', c.recv(100).decode())"
  cli:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    completion: {minSucceededInstances: -1}
    commands:
      - >-
        until printf '%s' '<% $parameters.greeting %>' 2>/dev/null
        >/dev/tcp/$PAI_HOST_IP_srv_0/$PAI_PORT_LIST_srv_0_talk; do sleep 0.1; done
      - echo "cli at $PAI_CONTAINER_HOST_IP"
      - exit <% $parameters.code %>
  echo:
    instances: 2
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 64}
    completion: {minSucceededInstances: -1}
    commands:
      - echo "i am $PAI_CURRENT_TASK_ROLE_NAME $PAI_TASK_INDEX (token <% $secrets.token %>)"
      - echo kept > left.txt
extras:
  storages: [{name: data, mountPath: /data}]
"""

LOOP = """\
protocolVersion: 2
name: loop
type: job
prerequisites:
  - {name: image, type: dockerimage, uri: "python:3.11"}
taskRoles:
  loop:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands:
      - trap 'echo got TERM; exit 0' TERM
      - echo ready
      - while true; do sleep 0.1; done
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Tasks on the host, temporary directories in the test's own folder."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o755)
    return {**os.environ, "PAI_ISOLATION": "host", "TMPDIR": str(scratch), "NO_COLOR": "1"}


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


RETRIED = """\
protocolVersion: 2
name: retried
type: job
jobRetryCount: 1
prerequisites:
  - {name: image, type: dockerimage, uri: "python:3.11"}
taskRoles:
  try:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands:
      - echo "attempt $FC_FRAMEWORK_ATTEMPT_ID"
      - test "$FC_FRAMEWORK_ATTEMPT_ID" = 1
"""


def pai_run(env: dict[str, str], *args: str, input: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*pai_command(), "run", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=COMMAND_TIMEOUT,
    )


def test_roles_talk_over_tcp_with_labelled_output_and_parameters_applied(
    job: Path, env: dict[str, str]
) -> None:
    done = pai_run(env, str(job), "-p", "greeting=bonjour", "--secret", "token=s3cr3t")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "[srv/0] srv got bonjour" in lines
    assert "[cli/0] cli at 127.0.0.2" in lines
    assert "[echo/0] i am echo 0 (token s3cr3t)" in lines
    assert "[echo/1] i am echo 1 (token s3cr3t)" in lines
    # What cannot be as on a cluster is said first.
    notes = done.stderr
    assert "not in containers of their images (PAI_ISOLATION=host)" in notes
    assert "storage data is not mounted here: tasks find nothing at /data" in notes
    assert re.search(r"echo/0 asks for 64 GPUs, but this machine has \d+ left", notes)
    assert "secret token" not in notes
    assert "the job succeeded" in done.stderr
    assert os.listdir(env["TMPDIR"]) == []  # nothing left behind without --keep


def test_a_failing_task_fails_the_job_with_its_exit_code(job: Path, env: dict[str, str]) -> None:
    done = pai_run(env, str(job), "-p", "code=7")

    assert done.returncode == 7, done.stderr
    assert (
        "the job failed: task cli/0 ended with exit code 7, PAI code 255 "
        "(PAIRuntimeUnknownFailed); UNKNOWN_FAILURE (UNKNOWN): "
    ) in done.stderr


def test_a_failed_attempt_is_retried_as_the_job_allows(tmp_path: Path, env: dict[str, str]) -> None:
    job = tmp_path / "retry.yaml"
    job.write_text(RETRIED)

    done = pai_run(env, str(job))

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[try/0] attempt 0", "[try/0] attempt 1"]
    assert "job attempt 0 ended with 255 PAIRuntimeUnknownFailed; retrying" in done.stderr


def test_bad_arguments_are_refused_before_anything_runs(job: Path, env: dict[str, str]) -> None:
    for arguments, error in (
        (
            ["-p", "nope=1"],
            "error: the job declares no parameter 'nope' (declared: code, greeting)",
        ),
        (["--role", "nope"], "the job has no such role (it has srv, cli, echo)"),
    ):
        done = pai_run(env, str(job), *arguments)

        assert done.returncode == 1
        assert error in done.stderr
        assert done.stdout == ""
    assert os.listdir(env["TMPDIR"]) == []


def test_one_task_runs_alone_and_keep_leaves_its_working_directory(
    job: Path, env: dict[str, str]
) -> None:
    done = pai_run(env, str(job), "--role", "echo", "--index", "1", "--keep")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[echo/1] i am echo 1 (token )"]
    assert "only echo/1 runs" in done.stderr
    assert "secret token is not given (--secret token=VALUE or --secrets-file)" in done.stderr
    kept = re.search(r"kept its working directory (\S+) ", done.stderr)
    assert kept is not None, done.stderr
    assert (Path(kept[1]) / "left.txt").read_text() == "kept\n"
    assert Path(kept[1]).is_relative_to(env["TMPDIR"])


def test_a_shell_opens_in_the_tasks_environment(job: Path, env: dict[str, str]) -> None:
    commands = 'echo "role=$PAI_CURRENT_TASK_ROLE_NAME index=$PAI_TASK_INDEX dir=$(pwd)"\n'
    commands += 'echo "work=$PAI_WORK_DIR"\nexit 4\n'

    done = pai_run(env, str(job), "--shell", "--role", "echo", "--index", "1", input=commands)

    assert done.returncode == 4, done.stderr
    shown = dict(part.split("=", 1) for part in done.stdout.split())
    assert shown["role"] == "echo" and shown["index"] == "1"
    assert shown["dir"] == shown["work"]
    assert "i am echo" not in done.stdout  # the shell, not the commands


def test_ctrl_c_stops_every_task_with_its_grace_period(tmp_path: Path, env: dict[str, str]) -> None:
    job = tmp_path / "loop.yaml"
    job.write_text(LOOP)
    process = subprocess.Popen(
        [*WITH_DEFAULT_SIGINT, *pai_command(), "run", str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "[loop/0] ready\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=COMMAND_TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "[loop/0] got TERM" in out
    assert "the job was stopped" in err
    time.sleep(0.2)
    assert os.listdir(env["TMPDIR"]) == []
