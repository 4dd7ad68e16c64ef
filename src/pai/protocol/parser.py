"""Job text to a validated JobSpec, or one ProtocolError that lists every problem with its place."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError
from yaml.nodes import Node

from pai.protocol.base import describe_value
from pai.protocol.checks import reference_problems
from pai.protocol.errors import Problem, ProtocolError
from pai.protocol.job import JobSpec
from pai.protocol.masking import masked_composed_text
from pai.protocol.messages import validation_problems
from pai.protocol.yaml_tree import compose_document, decode_job_text
from pai.protocol.yaml_values import build_values

_FIELD_PROBLEM = re.compile(r"((?:defaults|extras|taskRoles)(?:\.[A-Za-z0-9_-]+)+): (.+)", re.S)


@dataclass(frozen=True)
class SubmittedJob:
    """A job file read once for everything a submission keeps of it."""

    spec: JobSpec
    masked_text: str
    """The text as submitted with secret values masked (`masked_job_text`)."""


def parse_job(text: str | bytes) -> JobSpec:
    """Parse and validate a job file (the OpenPAI job protocol v2) the way OpenPAI's server does.

    `text` is the YAML as submitted; bytes must be UTF-8. Raises ProtocolError listing every
    problem found: YAML syntax, duplicate keys, unknown or mistyped fields, missing required
    fields, references to prerequisites, deployments or roles that do not exist, and documents
    over the size, node-count or nesting limits.
    """
    return _validated(compose_document(decode_job_text(text)))


def parse_submitted_job(text: str | bytes) -> SubmittedJob:
    """`parse_job` and `masked_job_text` of one job file, parsing its YAML once."""
    decoded = decode_job_text(text)
    root = compose_document(decoded)
    return SubmittedJob(spec=_validated(root), masked_text=masked_composed_text(decoded, root))


def field_problem(text: str | bytes, problem: str) -> Problem | None:
    """A problem found after parsing (by checks that need the cluster, such as the scheduler's)
    placed in the job file `text`, if it is about one field: such problems start with the
    field's path, `extras.hivedScheduler.taskRoles.worker.skuNum: ...`. None for others."""
    match = _FIELD_PROBLEM.fullmatch(problem)
    if match is None:
        return None
    path, message = match[1], match[2]
    root = compose_document(decode_job_text(text))
    if root is None:
        return Problem(path=path, message=message)
    return build_values(root).sources.problem(tuple(path.split(".")), message)


def _validated(root: Node | None) -> JobSpec:
    if root is None:
        raise ProtocolError(
            [
                Problem(
                    path="",
                    message="the document is empty; a job needs at least protocolVersion, name, "
                    "type and taskRoles",
                    line=1,
                    column=1,
                )
            ]
        )
    document = build_values(root)
    if not isinstance(document.data, dict):
        got = describe_value(document.data)
        raise ProtocolError(
            [
                *document.problems,
                document.sources.problem(
                    (), f"a job must be a mapping of fields (protocolVersion, name, ...), got {got}"
                ),
            ]
        )
    problems = [*document.problems, *reference_problems(document.data, document.sources)]
    try:
        spec = JobSpec.model_validate(document.data, by_alias=True, by_name=False)
    except ValidationError as exc:
        # A value the YAML layer already rejected (and replaced by null) is not reported twice.
        problems += [
            problem
            for problem in validation_problems(exc, document.data, document.sources)
            if problem.path not in document.rejected
        ]
        raise ProtocolError(problems) from None
    if problems:
        raise ProtocolError(problems)
    return spec
