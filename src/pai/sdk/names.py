"""Job names as users type them (`job` or `user~job`) and as the API wants them (`user~job`)."""

from __future__ import annotations

from urllib.parse import quote

from pai.sdk.errors import InvalidArgumentError

SEPARATOR = "~"


def framework_name(name: str, username: str | None) -> str:
    """The framework name `user~job` for `name`; a bare `job` belongs to `username`.

    >>> framework_name("hello", "alice")
    'alice~hello'
    >>> framework_name("bob~hello", "alice")
    'bob~hello'
    """
    parts = name.split(SEPARATOR)
    if len(parts) > 2 or not all(parts):
        raise InvalidArgumentError(f"job name {name!r} is not 'job' or 'user~job'")
    if len(parts) == 2:
        return name
    if username is None:
        raise InvalidArgumentError(
            f"job name {name!r} names no user and the client is not logged in; use 'user~{name}'"
        )
    return f"{username}{SEPARATOR}{name}"


def segment(value: str | int) -> str:
    """`value` quoted as one URL path segment (a tag or a role name cannot escape its place).
    An empty value, `.` or `..` would name another path than the one meant, so none is sent."""
    text = str(value)
    if text in ("", ".", ".."):
        raise InvalidArgumentError(f"{text!r} is not a name: a name cannot be empty, '.' or '..'")
    return quote(text, safe=SEPARATOR)
