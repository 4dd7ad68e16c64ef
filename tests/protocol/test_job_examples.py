"""The example jobs parse, and their commands do what they say when run as PAI runs tasks.

Each task runs its rendered commands (secrets substituted) with bash in its own directory, given
the `PAI_*` variables these examples read. The variables are set here by hand, for exactly that
purpose; the full environment a task receives is the runtime's and is tested there.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pai.protocol import JobSpec, parse_job, render_commands, substitute_secrets

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
TASK_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class TaskResult:
    role: str
    index: int
    returncode: int
    stdout: str
    stderr: str


def example(name: str) -> JobSpec:
    return parse_job((EXAMPLES / name).read_text())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peer_variables(spec: JobSpec) -> dict[str, str]:
    """Where every task is: all on this host, each port label with its own free ports."""
    variables = {}
    for role, task_role in spec.task_roles.items():
        variables[f"PAI_TASK_ROLE_TASK_COUNT_{role}"] = str(task_role.instances)
        for index in range(task_role.instances):
            variables[f"PAI_HOST_IP_{role}_{index}"] = "127.0.0.1"
            for label, count in task_role.resource_per_instance.ports.items():
                ports = ",".join(str(free_port()) for _ in range(count))
                variables[f"PAI_PORT_LIST_{role}_{index}_{label}"] = ports
    return variables


def run_job(spec: JobSpec, workdir: Path) -> list[TaskResult]:
    """Start every task of the job at once and wait for all of them."""
    shared = {
        **os.environ,
        # the examples call python3; here that is the interpreter running the tests
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PAI_JOB_NAME": spec.name,
        **peer_variables(spec),
    }
    running = []
    for role, task_role in spec.task_roles.items():
        script = "\n".join(
            substitute_secrets(line, spec.secrets) for line in render_commands(spec, role)
        )
        for index in range(task_role.instances):
            cwd = workdir / f"{role}-{index}"
            cwd.mkdir()
            env = {
                **shared,
                "PAI_CURRENT_TASK_ROLE_NAME": role,
                "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index),
            }
            process = subprocess.Popen(
                ["bash", "-e", "-c", script],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            running.append((role, index, process))
    results = []
    for role, index, process in running:
        stdout, stderr = process.communicate(timeout=TASK_TIMEOUT_SECONDS)
        results.append(TaskResult(role, index, process.returncode, stdout, stderr))
    return results


def assert_all_succeeded(results: list[TaskResult]) -> None:
    failed = [result for result in results if result.returncode != 0]
    assert not failed, failed


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_every_example_parses(path: Path) -> None:
    spec = parse_job(path.read_text())

    assert spec.name == path.stem or path.stem in spec.name


def test_the_required_examples_exist() -> None:
    names = {path.name for path in EXAMPLES.glob("*.yaml")}

    assert {
        "hello-world.yaml",
        "ps-worker.yaml",
        "pytorch-ddp.yaml",
        "parameters-secrets-deployment.yaml",
        "opportunistic.yaml",
    } <= names


def test_hello_world_says_hello(tmp_path: Path) -> None:
    (result,) = run_job(example("hello-world.yaml"), tmp_path)

    assert result.returncode == 0, result
    assert result.stdout.startswith("Hello from task main/0\nPython 3.")


def test_parameter_server_and_workers_talk_over_tcp(tmp_path: Path) -> None:
    results = run_job(example("ps-worker.yaml"), tmp_path)

    assert_all_succeeded(results)
    server = next(result for result in results if result.role == "ps")
    # each of 2 workers pushes gradient (index + 1, 1) three times; lr 0.1
    assert server.stdout.splitlines()[-1] == "final parameters: [-0.9, -0.6]"
    workers = [result for result in results if result.role == "worker"]
    assert all(result.stdout.count("step") == 3 for result in workers)


def test_parameters_secrets_and_deployment(tmp_path: Path) -> None:
    spec = example("parameters-secrets-deployment.yaml")

    (result,) = run_job(spec, tmp_path)

    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0] == "training for 3 epochs on https://example.com/datasets/numbers.csv"
    assert lines[-1] == "wrote 0.1426 to results/weight.txt"
    assert (tmp_path / "train-0" / "results" / "weight.txt").read_text() == "0.1426\n"
    assert spec.secrets["api_token"] not in result.stdout + result.stderr


def test_opportunistic_example_is_opportunistic(tmp_path: Path) -> None:
    spec = example("opportunistic.yaml")

    results = run_job(spec, tmp_path)

    assert spec.priority_class == "oppo"
    assert spec.extras.gang_allocation is False
    assert_all_succeeded(results)
    assert results[1].stdout.splitlines()[-1] == "task 1 trial 4: score 32"


def test_rerunning_the_opportunistic_example_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    spec = example("opportunistic.yaml")
    (tmp_path / "sweep-0").mkdir()
    (tmp_path / "sweep-0" / "sweep-0.progress").write_text("3")

    script = "\n".join(render_commands(spec, "sweep"))
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path / "sweep-0",
        env={**os.environ, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": "0"},
        capture_output=True,
        text=True,
        check=False,
        timeout=TASK_TIMEOUT_SECONDS,
    )

    assert done.returncode == 0, done
    assert done.stdout.splitlines() == ["task 0 trial 3: score 9", "task 0 trial 4: score 16"]


@pytest.mark.slow
@pytest.mark.torch
def test_pytorch_ddp_trains_on_two_workers(tmp_path: Path, torch_module: object) -> None:
    results = run_job(example("pytorch-ddp.yaml"), tmp_path)

    assert_all_succeeded(results)
    first = next(result for result in results if result.index == 0)
    final = first.stdout.splitlines()[-1]
    assert final.startswith("final loss: ")
    assert float(final.removeprefix("final loss: ")) < 0.05
