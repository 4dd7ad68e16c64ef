"""Pydantic validation errors as problems a person can act on, placed at their line and column.

Pydantic reports a location (`loc`) in the validated data and a terse message. Here each `loc` is
walked through the document (to find the value and its place in the text) and through the models
(to know what the field expects), so that `gpu: two` reads "must be an integer ≥ 0, got 'two'".
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from pai.protocol.base import PATTERN_RULES, describe_value
from pai.protocol.errors import Problem
from pai.protocol.job import JobSpec
from pai.protocol.yaml_values import Path, SourceMap

_Loc = tuple[int | str, ...]
_INTEGER_ERRORS = {
    "int_type",
    "int_parsing",
    "int_from_float",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
}


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """Strip Annotated and Optional, collecting the constraints met on the way."""
    metadata: list[Any] = []
    while True:
        if get_origin(annotation) is Annotated:
            annotation, *extra = get_args(annotation)
            for item in extra:
                metadata.extend(item.metadata if isinstance(item, FieldInfo) else [item])
            continue
        if get_origin(annotation) in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation, metadata


def _tags(annotation: Any) -> dict[str, type[BaseModel]]:
    """The members of a discriminated union by their `type` tag."""
    members: dict[str, type[BaseModel]] = {}
    for member in get_args(annotation):
        if (
            isinstance(member, type)
            and issubclass(member, BaseModel)
            and "type" in member.model_fields
        ):
            for tag in get_args(member.model_fields["type"].annotation):
                members[tag] = member
    return members


def _step(annotation: Any, item: int | str) -> tuple[Any, list[Any]] | None:
    annotation, _ = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            if item in (info.alias, name):
                field_type, metadata = _unwrap(info.annotation)
                return field_type, [*info.metadata, *metadata]
        return None
    origin = get_origin(annotation)
    if origin is dict:
        return _unwrap(get_args(annotation)[1])
    if origin is list:
        return _unwrap(get_args(annotation)[0])
    member = _tags(annotation).get(str(item))
    return (member, []) if member is not None else None


def _expected_at(loc: Sequence[int | str]) -> tuple[Any, list[Any]]:
    """The type the models expect at `loc`, and its constraints (unknown: None)."""
    current: tuple[Any, list[Any]] = (JobSpec, [])
    for item in loc:
        if item == "[key]":
            return (
                _unwrap(get_args(current[0])[0]) if get_origin(current[0]) is dict else (None, [])
            )
        found = _step(current[0], item)
        if found is None:
            return None, []
        current = found
    return current


def _describe_integer(metadata: list[Any]) -> str:
    bounds = []
    for constraint in metadata:
        if isinstance(constraint, annotated_types.Ge):
            bounds.append(f"≥ {constraint.ge}")
        elif isinstance(constraint, annotated_types.Gt):
            bounds.append(f"> {constraint.gt}")
        elif isinstance(constraint, annotated_types.Le):
            bounds.append(f"≤ {constraint.le}")
        elif isinstance(constraint, annotated_types.Lt):
            bounds.append(f"< {constraint.lt}")
    return " ".join(["an integer", " and ".join(bounds)]).strip()


def _is_integer_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip().removeprefix("-").isdigit()


def _unknown_field(loc: _Loc, name: Any) -> str:
    model, _ = _expected_at(loc[:-1])
    message = f"unknown field {describe_value(name)}"
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return message
    allowed = [info.alias or field for field, info in model.model_fields.items()]
    close = difflib.get_close_matches(str(name), allowed, n=1, cutoff=0.6)
    if close:
        return f"{message}; did you mean {describe_value(close[0])}?"
    return f"{message}; allowed here: {', '.join(allowed)}"


def _message(error: ErrorDetails, got: str) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error["input"]
    loc = tuple(error["loc"])
    if kind == "missing":
        return "this field is required"
    if kind == "extra_forbidden":
        return _unknown_field(loc, loc[-1])
    if kind in _INTEGER_ERRORS:
        expected, metadata = _expected_at(loc)
        if expected is int:
            unquote = " (write it without quotes)" if _is_integer_text(value) else ""
            return f"must be {_describe_integer(metadata)}, got {got}{unquote}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {got}"
    if kind == "string_type":
        quote = " (put it in quotes to make it text)" if isinstance(value, int | float) else ""
        return f"must be a string, got {got}{quote}"
    if kind == "string_pattern_mismatch":
        rule = PATTERN_RULES.get(ctx.get("pattern", ""), f"must match {ctx.get('pattern')}")
        return f"{got} is not a valid name: it {rule}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, got {got}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping (key: value pairs), got {got}"
    if kind == "list_type":
        return f"must be a list, got {got}"
    if kind == "too_short":
        minimum = ctx.get("min_length")
        if isinstance(value, dict):
            return f"must have at least {minimum} {'entry' if minimum == 1 else 'entries'}"
        return f"must have at least {minimum} {'item' if minimum == 1 else 'items'}"
    if kind == "union_tag_invalid":
        return f"must be one of {ctx.get('expected_tags')}, got {describe_value(ctx.get('tag'))}"
    if kind == "union_tag_not_found":
        union, _ = _expected_at(loc)
        return "this field is required: one of " + ", ".join(repr(tag) for tag in _tags(union))
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {got}"


def _document_path(loc: _Loc, data: Any) -> Path:
    """The part of `loc` that indexes into the document (union tags are pydantic's, not ours)."""
    path: list[Any] = []
    node = data
    for position, item in enumerate(loc):
        if item == "[key]":
            break
        in_mapping = isinstance(node, dict) and item in node
        in_list = isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node)
        if in_mapping or in_list:
            node = node[item]
        elif position != len(loc) - 1:
            continue
        path.append(item)
    return tuple(path)


def _is_sensitive(path: Path) -> bool:
    """Values here may be credentials; an error message must not repeat them."""
    return bool(path) and (path[0] == "secrets" or "auth" in path[-2:])


def validation_problems(error: ValidationError, data: Any, sources: SourceMap) -> list[Problem]:
    """One located problem per pydantic error of validating `data` (the document's values)."""
    problems = []
    for details in error.errors(include_url=False):
        loc = tuple(details["loc"])
        path = _document_path(loc, data)
        kind = details["type"]
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            path = (*path, str(details.get("ctx", {}).get("discriminator", "type")).strip("'"))
        got = "a hidden value" if _is_sensitive(path) else describe_value(details["input"])
        # A missing field is shown at the key of the mapping that lacks it.
        of_key = kind in ("extra_forbidden", "missing", "union_tag_not_found") or (
            bool(loc) and loc[-1] == "[key]"
        )
        problems.append(sources.problem(path, _message(details, got), of_key=of_key))
    return problems
