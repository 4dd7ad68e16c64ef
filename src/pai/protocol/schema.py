"""The protocol as a JSON Schema, for editors that complete and check job files as users type."""

from __future__ import annotations

from typing import Any

from pai.protocol.job import JobSpec

JSON_SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"
"""Draft 7: the newest dialect every common YAML editor plugin understands."""


def job_json_schema() -> dict[str, Any]:
    """A JSON Schema of the job file, generated from the models, with a description per field.

    It checks the shape of a job; rules across fields (that a referenced prerequisite exists,
    unique names) are checked by `parse_job` and `pai validate` only.
    """
    schema = JobSpec.model_json_schema(by_alias=True, mode="validation")
    schema["title"] = "PAI job (OpenPAI job protocol v2)"
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}
