"""What the submit page does to a job's text: parameter values typed in fields, a clone's new
name, masked secrets found at their lines; and the examples it starts from."""

from __future__ import annotations

from pathlib import Path

import yaml

from pai.marketplace.examples import job_examples
from pai.protocol import SECRET_MASK, masked_job_text, parse_job
from pai.web.editing import (
    Parameter,
    declared_parameters,
    masked_secrets,
    renamed,
    with_parameters,
)

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
JOB = """\
# tuned by hand
protocolVersion: 2
name: tuning   # the job's name
type: job
parameters:
  rate: 0.1    # learning rate
  label: "first run"
  layers: [64, 32]
  note: |
    several
    lines
secrets:
  token: abc
taskRoles:
  main:
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo <% $parameters.rate %>]
prerequisites:
  - {type: dockerimage, name: image, uri: "python:3.11"}
"""


def test_the_declared_parameters_are_listed_in_file_order() -> None:
    assert declared_parameters(JOB) == [
        Parameter("rate", "0.1", editable=True),
        Parameter("label", "first run", editable=True),
        Parameter("layers", "[64, 32]", editable=False),
        Parameter("note", "|\n    several\n    lines", editable=False),
    ]
    assert declared_parameters("not: [a job") == []


def test_a_typed_value_replaces_the_declared_one_and_nothing_else() -> None:
    edited = with_parameters(JOB, {"rate": "0.5", "label": "second: run", "layers": "[1]"})
    assert edited.splitlines()[5] == "  rate: 0.5    # learning rate"
    assert edited.splitlines()[6] == '  label: "second: run"'
    values = yaml.safe_load(edited)
    assert values["parameters"] == {
        "rate": 0.5,
        "label": "second: run",
        "layers": [64, 32],  # a list is edited in the YAML, not in a field
        "note": "several\nlines\n",
    }
    assert len(edited.splitlines()) == len(JOB.splitlines())
    parse_job(edited)


def test_text_that_looks_like_yaml_structure_stays_a_string() -> None:
    edited = with_parameters(JOB, {"rate": "{a: 1}", "label": "true"})
    assert yaml.safe_load(edited)["parameters"]["rate"] == "{a: 1}"
    assert yaml.safe_load(edited)["parameters"]["label"] is True


def test_unchanged_and_undeclared_values_leave_the_text_as_it_was() -> None:
    assert with_parameters(JOB, {"rate": "0.1", "epochs": "9"}) == JOB


def test_a_clone_gets_its_new_name_in_place() -> None:
    edited = renamed(JOB, "tuning-2")
    assert edited.splitlines()[2] == 'name: "tuning-2"   # the job\'s name'
    assert parse_job(edited).name == "tuning-2"


def test_masked_secrets_are_found_at_their_lines() -> None:
    masked = masked_job_text(JOB)
    assert SECRET_MASK in masked
    problems = masked_secrets(masked)
    assert [(problem.path, problem.line) for problem in problems] == [("secrets.token", 13)]
    assert masked_secrets(JOB) == []


def test_every_example_is_offered_and_is_a_valid_job() -> None:
    offered = job_examples()
    assert sorted(offered) == sorted(path.stem for path in EXAMPLES.glob("*.yaml"))
    for example in offered.values():
        assert example.text == (EXAMPLES / f"{example.name}.yaml").read_text()
        assert example.summary and not example.summary.startswith("#")
        parse_job(example.text)
