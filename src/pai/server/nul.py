"""Text with the NUL character (U+0000) is refused at the edge, on either database.

PostgreSQL can store NUL neither in text nor in JSON, and no name, tag or description needs
it; left to the store, the same request would work on SQLite and fail on PostgreSQL in the
middle of a transaction. So a request is refused with a 400 that names where the NUL is: in
its path or query by `RejectNulMiddleware`, in a JSON body by the request models (`find_nul`),
in a job file by the protocol parser.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from starlette.types import Scope

NUL = "\x00"
NUL_REFUSED = "text may not contain the NUL character (U+0000)"


def _shown(name: object) -> str:
    """A key or parameter name for an error message, its NULs written as `\\0`."""
    return str(name).replace(NUL, "\\0")


def find_nul(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (value or key) in `value` containing NUL, or None
    if there is none; `""` stands for `value` itself."""
    if isinstance(value, str):
        return path if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{_shown(key)}" if path else _shown(key)
            if isinstance(key, str) and NUL in key:
                return inner
            found = find_nul(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list):
        for number, item in enumerate(value):
            found = find_nul(item, f"{path}[{number}]")
            if found is not None:
                return found
    return None


def nul_in_url(scope: Scope) -> str | None:
    """Where a request's path or query holds NUL (`path`, `query.<name>`), or None."""
    if NUL in scope.get("path", ""):
        return "path"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if NUL in name or NUL in value:
            return f"query.{_shown(name)}"
    return None
