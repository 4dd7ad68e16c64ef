"""What every protocol model shares: strictness, camelCase aliases, and the common value types."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

NAME_PATTERN = r"^[a-zA-Z0-9_-]+$"
IDENTIFIER_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]*$"

PATTERN_RULES = {
    NAME_PATTERN: "may contain only letters, digits, '_' and '-'",
    IDENTIFIER_PATTERN: "must start with a letter or '_' and contain only letters, digits and '_'",
}
"""Plain-English reading of each pattern, used in error messages."""


def describe_value(value: Any) -> str:
    """A short, YAML-flavoured rendering of a value for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return repr(shown)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


class ProtocolModel(BaseModel):
    """Base of the protocol models: strict types, unknown keys rejected, camelCase in YAML/JSON.

    Strict because OpenPAI's server does not coerce either: `gpu: "2"` is an error there too.
    """

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        field_title_generator=lambda name, info: info.alias or to_camel(name),
    )


class OpenProtocolModel(ProtocolModel):
    """A protocol object where OpenPAI keeps keys it does not know (plugin parameters, extras)."""

    model_config = ConfigDict(extra="allow")


def _protocol_version(value: Any) -> Any:
    if value == "2" or (type(value) is int and value == 2):
        return 2
    raise ValueError(f"must be 2 (the only version of the protocol), got {describe_value(value)}")


ProtocolVersion = Annotated[
    Literal[2],
    BeforeValidator(_protocol_version),
    WithJsonSchema({"enum": [2, "2"], "description": "Protocol version: always 2."}),
]


def _version_text(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


VersionText = Annotated[
    str,
    BeforeValidator(_version_text),
    WithJsonSchema({"type": ["string", "number"]}),
]
"""Free-text version; OpenPAI accepts numbers too, kept here as their text."""

Name = Annotated[str, Field(min_length=1, max_length=255, pattern=NAME_PATTERN)]
Identifier = Annotated[str, Field(pattern=IDENTIFIER_PATTERN)]


class ComponentHeader(ProtocolModel):
    """Fields every component of the protocol carries (jobs and prerequisites alike)."""

    protocol_version: ProtocolVersion | None = Field(
        default=None, description="Protocol version of this component: 2."
    )
    name: Name = Field(description="Name: letters, digits, '_' and '-' (at most 255 characters).")
    version: VersionText | None = Field(
        default=None, description="Free-text version, such as an image tag or a git commit."
    )
    contributor: str | None = Field(default=None, description="Who wrote this component.")
    description: str | None = Field(default=None, description="What it is for (Markdown).")
