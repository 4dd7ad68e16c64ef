"""`pai run` with tasks in containers of their image (podman, the suite's busybox), as a user
runs it: roles that talk over TCP, the image pulled with the job's registry credentials."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from test_pai_run import COMMAND_TIMEOUT

from cli.pai_runner import pai_command
from pai.executors.sandboxes.containers import REGISTRY_USER, ContainerSandbox

JOB = """\
protocolVersion: 2
name: talk-in-containers
type: job
parameters:
  greeting: hello
prerequisites:
  - name: image
    type: dockerimage
    uri: {image}
    auth: {{username: {user}, password: "<% $secrets.registry %>", registryuri: {registry}}}
taskRoles:
  srv:
    instances: 1
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0, ports: {{web: 1}}}}
    commands:
      - mkdir www && echo '<% $parameters.greeting %>' > www/index.html
      - exec httpd -f -h www -p $PAI_CONTAINER_HOST_IP:$PAI_PORT_LIST_srv_0_web
  cli:
    instances: 1
    dockerImage: image
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands:
      - command -v python3 || echo "no python3 in this image"
      - >-
        until wget -q -O - http://$PAI_HOST_IP_srv_0:$PAI_PORT_LIST_srv_0_web/;
        do sleep 0.2; done
"""


def test_roles_in_containers_talk_over_tcp_and_the_job_ends_with_the_client(
    tmp_path: Path,
    busybox_image: str,
    container_sandbox: ContainerSandbox,
    sandbox_env: dict[str, str],
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        JOB.format(image=busybox_image, user=REGISTRY_USER, registry=container_sandbox.registry)
    )
    secrets = tmp_path / "secrets.yaml"
    secrets.write_text(f"registry: {container_sandbox.password}\n")
    container_sandbox.remove_image(busybox_image)

    done = subprocess.run(
        [*pai_command(), "run", str(job), "-p", "greeting=bonjour", "--secrets-file", str(secrets)],
        capture_output=True,
        text=True,
        env={**os.environ, "PAI_ISOLATION": "container", "NO_COLOR": "1"},
        timeout=COMMAND_TIMEOUT * 2,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "[cli/0] no python3 in this image" in lines  # busybox, not this machine
    assert "[cli/0] bonjour" in lines
    assert f"image {busybox_image} is not on this machine: it is pulled first" in done.stderr
    assert "tasks run in containers" in done.stderr
    assert container_sandbox.podman("ps", "--all", "--format", "{{.Names}}").split() == []


def test_a_shell_opens_in_the_tasks_image(
    tmp_path: Path,
    busybox_image: str,
    container_sandbox: ContainerSandbox,
    sandbox_env: dict[str, str],
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        JOB.format(image=busybox_image, user=REGISTRY_USER, registry=container_sandbox.registry)
    )
    commands = "command -v python3 || echo no python3\necho at $PAI_HOST_IP_cli_0 in $(pwd)\n"
    secret = f"registry={container_sandbox.password}"

    done = subprocess.run(
        [*pai_command(), "run", str(job), "--shell", "--role", "cli", "--secret", secret],
        input=commands,
        capture_output=True,
        text=True,
        env={**os.environ, "PAI_ISOLATION": "container", "NO_COLOR": "1"},
        timeout=COMMAND_TIMEOUT * 2,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "no python3"
    assert re.fullmatch(r"at 127\.0\.0\.2 in /\S+/work", lines[1]), lines
