"""Portal routes: errors become pages a person can read, and every answer carries the headers
that keep a page with user data out of caches, frames and foreign scripts.

The API turns errors into `{code, message}` JSON app-wide; a portal route catches them first.
A visitor whose session is missing or over is sent to the login form; any other error is a
page saying what went wrong. Requests made by the portal's own scripts (`X-Requested-With`)
get the API's JSON body instead, which the scripts show in place.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from pai.errors import InvalidParametersError, PaiError, UnauthorizedUserError
from pai.server.errors import describe_validation_errors, error_response
from pai.web.templating import render

SCRIPT_HEADER = "X-Requested-With"
"""Sent by the portal's scripts, which want errors as JSON rather than as pages."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_TITLES = {
    400: "This request cannot be done",
    401: "Please log in",
    403: "Not allowed",
    404: "Not found",
    409: "Already exists",
    429: "Too many requests",
}

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class PortalRoute(APIRoute):
    """An APIRoute whose errors are answered for people (see the module docstring)."""

    def get_route_handler(self) -> Handler:
        handle = super().get_route_handler()

        async def handle_for_people(request: Request) -> Response:
            try:
                response = await handle(request)
            except RequestValidationError as invalid:
                message = describe_validation_errors(invalid.errors())
                response = error_answer(request, InvalidParametersError(message))
            except PaiError as error:
                response = error_answer(request, error)
            response.headers.update(SECURITY_HEADERS)
            return response

        return handle_for_people


def portal_router() -> APIRouter:
    """A router for portal pages: PortalRoute, and left out of the API's OpenAPI document.

    Route names start with `portal.`: names are shared with the API's routes in one app, and
    `url_path_for` takes the first route of a name."""
    return APIRouter(route_class=PortalRoute, include_in_schema=False)


def error_answer(request: Request, error: PaiError) -> Response:
    if request.headers.get(SCRIPT_HEADER):
        return error_response(error)
    if isinstance(error, UnauthorizedUserError):
        return RedirectResponse(login_url(request), status_code=303)
    return render(
        request,
        "error.html",
        status_code=error.status,
        headers=error.headers,
        title=_TITLES.get(error.status, "Something went wrong"),
        message=error.message,
        status=error.status,
    )


def login_url(request: Request) -> str:
    """The login form, coming back to this page afterwards (a form sent with an expired
    session cannot be replayed, so that one comes back home)."""
    if request.method != "GET":
        return "/login"
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login?" + urlencode({"next": here}) if here != "/" else "/login"
