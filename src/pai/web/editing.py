"""Edits the submit page makes to a job's YAML text before it is submitted.

Each edit replaces one value in place, so the rest of the text (comments, layout, line numbers)
stays as the user wrote it: parameter values typed in the page's fields, and a fresh name for
a cloned job. A cloned job shows its secrets masked, and `masked_secrets` finds those the user
has not typed again.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pai.protocol import SECRET_MASK, Problem, ProtocolError
from pai.protocol.yaml_tree import compose_document, decode_job_text

_IN_PLACE_STYLES = ("", None, "'", '"')
"""Plain and quoted scalars, which a one-line value can replace (block scalars span lines)."""


@dataclass(frozen=True)
class Parameter:
    """A parameter the job declares."""

    name: str
    value: str
    """The value as text: a scalar's content, or the YAML of a list or mapping."""
    editable: bool
    """Whether a field may change it (single-line values; others are edited in the YAML)."""


def declared_parameters(text: str) -> list[Parameter]:
    """The job's `parameters`, in file order; none when the text is not a YAML mapping."""
    root = _root(text)
    parameters = _entry(root, "parameters")
    if not isinstance(parameters, MappingNode):
        return []
    found = []
    for key, value in parameters.value:
        if not isinstance(key, ScalarNode):
            continue
        scalar = _in_place(text, key, value)
        if scalar is not None:
            found.append(Parameter(key.value, scalar.value, editable=True))
        else:
            written = text[value.start_mark.index : value.end_mark.index].strip()
            found.append(Parameter(key.value, written, editable=False))
    return found


def with_parameters(text: str, values: Mapping[str, str]) -> str:
    """The text with the values of declared, editable parameters replaced by `values`.

    A value that reads as a YAML number or boolean is written as typed; anything else is
    written as a quoted string. Unchanged values leave the text untouched.
    """
    root = _root(text)
    parameters = _entry(root, "parameters")
    if not isinstance(parameters, MappingNode):
        return text
    edits = []
    for key, value in parameters.value:
        if not isinstance(key, ScalarNode) or key.value not in values:
            continue
        scalar, typed = _in_place(text, key, value), values[key.value]
        if scalar is not None and typed != scalar.value:
            edits.append((scalar, _yaml_scalar(typed)))
    return _replaced(text, edits)


def renamed(text: str, name: str) -> str:
    """The text with the job's `name` replaced (a clone needs a name of its own)."""
    pair = _pair(_root(text), "name")
    scalar = _in_place(text, *pair) if pair is not None else None
    return text if scalar is None else _replaced(text, [(scalar, json.dumps(name))])


def job_name(text: str) -> str:
    """The job's `name` as written, or `job` when it has none."""
    pair = _pair(_root(text), "name")
    value = pair[1] if pair is not None else None
    return value.value if isinstance(value, ScalarNode) and value.value else "job"


def clone_name(name: str) -> str:
    """A name for a copy of job `name`, unlikely to be taken."""
    return f"{name}-{secrets.token_hex(2)}"


def masked_secrets(text: str) -> list[Problem]:
    """Secret values still masked as `******` (from a clone), each with its place."""
    root = _root(text)
    problems = []
    for path, node in _secret_values(root):
        if isinstance(node, ScalarNode) and node.value == SECRET_MASK:
            problems.append(
                Problem(
                    path=path,
                    message=f"the secret is masked ({SECRET_MASK}): type its value again, "
                    "since a job's secrets are never shown",
                    line=node.start_mark.line + 1,
                    column=node.start_mark.column + 1,
                )
            )
    return problems


def _root(text: str) -> MappingNode | None:
    try:
        root = compose_document(decode_job_text(text))
    except ProtocolError:
        return None
    return root if isinstance(root, MappingNode) else None


def _pair(node: Node | None, key: str) -> tuple[Node, Node] | None:
    """The (key, value) nodes of `key` in a mapping (the last, as YAML loaders keep it)."""
    if not isinstance(node, MappingNode):
        return None
    found = None
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            found = (key_node, value_node)
    return found


def _entry(node: Node | None, key: str) -> Node | None:
    pair = _pair(node, key)
    return pair[1] if pair is not None else None


def _secret_values(root: MappingNode | None) -> Iterator[tuple[str, Node]]:
    block = _entry(root, "secrets")
    if isinstance(block, MappingNode):
        for key, value in block.value:
            yield f"secrets.{key.value}", value
    prerequisites = _entry(root, "prerequisites")
    if isinstance(prerequisites, SequenceNode):
        for index, item in enumerate(prerequisites.value):
            password = _entry(_entry(item, "auth"), "password")
            if password is not None:
                yield f"prerequisites[{index}].auth.password", password


def _in_place(text: str, key: Node, value: Node) -> ScalarNode | None:
    """`value` if it is a single-line scalar written right after its key (not through an
    alias, an anchor or a tag), which an edit can replace."""
    if not isinstance(value, ScalarNode) or value.style not in _IN_PLACE_STYLES:
        return None
    written = text[value.start_mark.index : value.end_mark.index]
    if (
        value.start_mark.index < key.end_mark.index
        or "\n" in written
        or written.startswith(("&", "*", "!"))
    ):
        return None
    return value


def _yaml_scalar(typed: str) -> str:
    try:
        value = yaml.safe_load(typed)
    except yaml.YAMLError:
        value = None
    if isinstance(value, bool | int | float) and "\n" not in typed:
        return typed.strip()
    return json.dumps(typed)


def _replaced(text: str, edits: Sequence[tuple[Node, str]]) -> str:
    for node, new in sorted(edits, key=lambda edit: edit[0].start_mark.index, reverse=True):
        text = text[: node.start_mark.index] + new + text[node.end_mark.index :]
    return text
