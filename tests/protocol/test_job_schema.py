"""The JSON Schema for editors: valid Draft 7, accepts the examples, catches shape errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from job_helpers import FULL_JOB, MINIMAL_JOB

from pai.protocol import job_json_schema

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "jobs").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = job_json_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("text", [MINIMAL_JOB, FULL_JOB, *(p.read_text() for p in EXAMPLES)])
def test_valid_jobs_satisfy_the_schema(validator: jsonschema.Draft7Validator, text: str) -> None:
    assert [error.message for error in validator.iter_errors(yaml.safe_load(text))] == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (("taskRoles", "worker", "instances"), "'two' is not of type 'integer'"),
        (("taskRoles", "worker", "dockerImag"), "Additional properties are not allowed"),
        (("protocolVersion",), "'two' is not one of [2, '2']"),
    ],
)
def test_shape_errors_are_caught(
    validator: jsonschema.Draft7Validator, change: tuple[str, ...], complaint: str
) -> None:
    document = yaml.safe_load(MINIMAL_JOB)
    target = document
    for key in change[:-1]:
        target = target[key]
    target[change[-1]] = "two"

    messages = [error.message for error in validator.iter_errors(document)]

    assert any(complaint in message for message in messages), messages


def _properties(node: Any) -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        for name, value in node.get("properties", {}).items():
            found.append((name, value))
        for value in node.values():
            found += _properties(value)
    elif isinstance(node, list):
        for value in node:
            found += _properties(value)
    return found


def test_fields_carry_descriptions_for_editors() -> None:
    schema = job_json_schema()

    undocumented = {
        name
        for name, field in _properties(schema)
        if "description" not in field and not (set(field) & {"$ref", "allOf"})
    }

    assert undocumented == set()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
