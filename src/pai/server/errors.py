"""The one place where errors become responses: HTTP status plus `{code, message}`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from pai.errors import (
    InvalidParametersError,
    NoApiError,
    PaiError,
    UnauthorizedUserError,
    UnknownError,
)
from pai.server.logconfig import redact
from pai.server.schemas import UNION_TAGS, ErrorBody

_DESCRIPTIONS = {
    400: "Invalid parameters (InvalidParametersError and similar)",
    401: "Missing, invalid, expired or revoked credentials (UnauthorizedUserError)",
    403: "Not allowed for this user (ForbiddenUserError)",
    404: "The named resource does not exist",
    409: "The resource already exists",
    413: "The upload is larger than the server allows (InvalidParametersError)",
    429: "Rate limit exceeded (TooManyRequestsError); see Retry-After",
    503: "Not ready (ServiceUnavailableError)",
    507: "The storage has no room for the data (InsufficientStorageError)",
}


def error_response(error: PaiError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    problems = getattr(error, "problems", None)
    body = ErrorBody(code=error.code, message=error.message, problems=problems or None)
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=error.status,
        headers={**error.headers, **(headers or {})},
    )


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI documentation of the error statuses an endpoint can answer."""
    return {
        status: {"model": ErrorBody, "description": _DESCRIPTIONS[status]} for status in statuses
    }


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PaiError, _on_pai_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _on_validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _on_http_exception)  # type: ignore[arg-type]


async def _on_pai_error(_request: Request, error: PaiError) -> JSONResponse:
    return error_response(error)


async def _on_validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
    return error_response(InvalidParametersError(describe_validation_errors(error.errors())))


def describe_validation_errors(errors: Sequence[Any]) -> str:
    """`body.data.password: String should have at least 6 characters; ...`, never the input
    value itself (it may be a password)."""
    parts = []
    for error in errors:
        loc = error.get("loc", ())
        location = ".".join(str(part) for part in loc if part not in UNION_TAGS)
        variants = "".join(f" {part}" for part in loc if part in UNION_TAGS)
        parts.append(f"{location}: {error.get('msg', 'invalid value')}{variants}")
    return "; ".join(parts) or "invalid request"


async def _on_http_exception(request: Request, error: HTTPException) -> JSONResponse:
    where = f"{request.method} {redact(request.url.path)}"
    if error.status_code == 404:
        return error_response(NoApiError(f"there is no API at {where}"))
    if error.status_code == 405:
        return error_response(
            NoApiError(f"method not allowed: {where}", status=405),
            {"Allow": ", ".join(_allowed_methods(request))},
        )
    if error.status_code == 401:
        return error_response(UnauthorizedUserError("malformed Authorization header"))
    if error.status_code == 400:
        return error_response(InvalidParametersError(str(error.detail)))
    return error_response(UnknownError(str(error.detail), status=error.status_code))


def _allowed_methods(request: Request) -> list[str]:
    """The methods of every route whose path matches, for the `Allow` header of a 405 (one path
    can be served by several routes, one per method)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(request.scope)
            if match is not Match.NONE:
                methods |= route.methods
    return sorted(methods)
