"""The body of a login (`POST /authn/basic/login`, `POST /tokens`): JSON, as PAI's clients send
it, or form-encoded, as OpenPAI's SDK and portal do (`username=...&password=...&expiration=...`).

Both are checked by the one model `LoginRequest`, so a form gets the same messages as JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from pai.errors import InvalidParametersError
from pai.server.schemas import LoginRequest

FORM_TYPE = "application/x-www-form-urlencoded"
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_INTEGER_FIELDS = frozenset({"expiration"})
"""Form values are text; these fields are numbers in the JSON body."""

LOGIN_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The user name and password, as JSON or form-encoded (as OpenPAI's SDK "
        "sends them); `expiration` is the token's lifetime in seconds.",
        "content": {
            "application/json": {"schema": LoginRequest.model_json_schema()},
            FORM_TYPE: {"schema": LoginRequest.model_json_schema()},
        },
    }
}
"""The OpenAPI description of the body, which FastAPI cannot infer from a dependency."""


async def login_request(request: Request) -> LoginRequest:
    """The login body of `request`, validated; InvalidParametersError says what is wrong."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    data = await (_form_fields(request) if media_type == FORM_TYPE else _json_body(request))
    try:
        return LoginRequest.model_validate(data)
    except ValidationError as invalid:
        errors = invalid.errors(include_url=False, include_input=False)
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in errors]
        ) from None


async def _form_fields(request: Request) -> dict[str, Any]:
    form = await request.form()
    fields: dict[str, Any] = {}
    for name in form:
        values = form.getlist(name)
        if len(values) > 1:
            raise InvalidParametersError(f"body.{name}: given {len(values)} times; give it once")
        value = values[0]
        if not isinstance(value, str):
            raise InvalidParametersError(f"body.{name}: must be text, not a file")
        numeric = name in _INTEGER_FIELDS and _INTEGER.fullmatch(value)
        fields[name] = int(value) if numeric else value
    return fields


async def _json_body(request: Request) -> Any:
    body = await request.body()
    try:
        return json.loads(body) if body else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidParametersError(
            "body: not valid JSON; send the login as JSON or as "
            f"{FORM_TYPE} (username, password, expiration)"
        ) from None
