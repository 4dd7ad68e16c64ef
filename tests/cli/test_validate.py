"""`pai validate` and `pai protocol schema`, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from pai.cli.main import app

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
VALID = """\
protocolVersion: 2
name: cli-job
type: job
prerequisites:
  - {type: dockerimage, name: image, uri: python:3.11}
taskRoles:
  worker:
    instances: 2
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0}
    commands: [echo hi]
"""
INVALID = VALID.replace("instances: 2", "instances: two").replace(
    "dockerImage: image", "dockerImage: img"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def test_a_valid_file_prints_ok_and_exits_0(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", VALID)

    result = runner.invoke(app, ["validate", path])

    assert result.exit_code == 0
    assert result.output == f"{path}: OK (job 'cli-job', 1 task role, 2 tasks)\n"


def test_each_problem_is_one_line_with_file_line_and_column(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = write(tmp_path, "job.yaml", INVALID)

    result = runner.invoke(app, ["validate", path])

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"{path}:8:16: taskRoles.worker.instances: must be an integer ≥ 1, got 'two'",
        f"{path}:9:18: taskRoles.worker.dockerImage: there is no dockerimage prerequisite "
        "named 'img'; did you mean 'image'?",
    ]


def test_any_invalid_file_makes_the_exit_code_1(runner: CliRunner, tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", VALID)
    bad = write(tmp_path, "bad.yaml", "protocolVersion: 2\nname: [\n")

    result = runner.invoke(app, ["validate", good, bad])

    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{good}: OK")
    assert lines[1].startswith(f"{bad}:3:1: invalid YAML")
    assert len(lines) == 2


def test_all_examples_are_valid(runner: CliRunner) -> None:
    paths = [str(path) for path in sorted(EXAMPLES.glob("*.yaml"))]

    result = runner.invoke(app, ["validate", *paths])

    assert result.exit_code == 0, result.output
    assert result.output.count(": OK (") == len(paths) >= 5


def test_a_missing_file_is_one_clear_line(runner: CliRunner, tmp_path: Path) -> None:
    path = str(tmp_path / "nowhere.yaml")

    result = runner.invoke(app, ["validate", path])

    assert result.exit_code == 1
    assert result.output == f"{path}: cannot read the file: No such file or directory\n"


def test_binary_garbage_is_a_problem_not_a_traceback(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "garbage.bin", bytes(range(256)))

    result = runner.invoke(app, ["validate", path])

    assert result.exit_code == 1
    # byte 128 is the first that is not UTF-8; byte 10 before it is a newline
    assert result.output == f"{path}:2:118: the file is not UTF-8 text\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_paths_with_brackets_are_printed_as_they_are(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", VALID.replace("uri: python:3.11", "url: python:3.11"))

    result = runner.invoke(app, ["validate", path])

    assert f"{path}:5:5: prerequisites[0].uri: this field is required" in result.output
    assert "prerequisites[0].url: unknown field 'url'; did you mean 'uri'?" in result.output


def test_a_dash_reads_standard_input(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "-"], input=VALID)

    assert result.exit_code == 0
    assert result.output.startswith("-: OK")


def test_no_file_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate"])

    assert result.exit_code == 2


def test_schema_is_json_schema_for_editors(runner: CliRunner) -> None:
    result = runner.invoke(app, ["protocol", "schema"])

    assert result.exit_code == 0
    schema = json.loads(result.output)
    jsonschema.Draft7Validator.check_schema(schema)
    assert jsonschema.Draft7Validator(schema).is_valid(yaml.safe_load(VALID))
    assert not jsonschema.Draft7Validator(schema).is_valid(yaml.safe_load(INVALID))
    assert "description" in schema["properties"]["taskRoles"]


def test_the_installed_command_validates(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", INVALID)
    command = Path(sys.executable).parent / "pai"

    done = subprocess.run(
        [str(command), "validate", path], capture_output=True, text=True, check=False, timeout=60
    )

    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith(f"{path}:8:16: taskRoles.worker.instances")
    assert "Traceback" not in done.stderr
