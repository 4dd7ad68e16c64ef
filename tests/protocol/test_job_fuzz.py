"""Whatever the input, parse_job returns a JobSpec or raises ProtocolError with located problems."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from job_helpers import FULL_JOB, MINIMAL_JOB

from pai.protocol import JobSpec, ProtocolError, masked_job_text, parse_job, render_commands

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_JOBS = [yaml.safe_load(MINIMAL_JOB), yaml.safe_load(FULL_JOB)]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["2", "job", "image", "worker", "<% $parameters.x %>", "-1", "0", "oppo"]),
)
keys = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["protocolVersion", "name", "type", "taskRoles", "worker", "commands", "gpu", "ports"]
    ),
    st.integers(min_value=-2, max_value=5),
)
structures = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=25,
)


def check(text: str | bytes) -> None:
    """The contract: a valid spec, or an error made only of well-formed problems."""
    try:
        spec = parse_job(text)
    except ProtocolError as error:
        assert error.problems
        for problem in error.problems:
            assert isinstance(problem.path, str) and problem.message
            assert problem.line is None or problem.line >= 1
            assert problem.column is None or problem.column >= 1
        return
    assert isinstance(spec, JobSpec)
    for role in spec.task_roles:
        render_commands(spec, role)
    masked_job_text(text)


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    check(text)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(raw: bytes) -> None:
    check(raw)


@FUZZ
@given(structures)
def test_random_structures(document: Any) -> None:
    check(yaml.safe_dump(document))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def near_valid_jobs(draw: st.DrawFn) -> Any:
    """A valid job with a few fields replaced, removed or added."""
    document = copy.deepcopy(draw(st.sampled_from(VALID_JOBS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(document)))
        if not path:
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(structures)
        elif action == "remove":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(structures)
        else:
            parent.append(draw(structures))
    return document


@FUZZ
@given(near_valid_jobs())
def test_structures_close_to_valid_jobs(document: Any) -> None:
    check(yaml.safe_dump(document, sort_keys=False))


@FUZZ
@given(near_valid_jobs(), st.sampled_from(["default_flow_style", "block", "canonical"]))
def test_close_jobs_in_other_yaml_styles(document: Any, style: str) -> None:
    options = {
        "default_flow_style": {"default_flow_style": True},
        "block": {},
        "canonical": {"canonical": True},
    }
    check(yaml.safe_dump(document, **options[style]))
