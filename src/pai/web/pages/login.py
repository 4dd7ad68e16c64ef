"""Logging in and out of the portal with a user name and password."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from pai.errors import IncorrectPasswordError, NoUserError, PaiError
from pai.server.deps import Context
from pai.server.routes.authn import ClientAddress, log_in, logout
from pai.server.schemas import LoginRequest
from pai.web.notices import redirect
from pai.web.routing import portal_router
from pai.web.session import (
    LOGIN_COOKIE,
    CurrentVisitor,
    FormVisitor,
    end_session,
    form_token,
    keep_login_secret,
    login_secret,
    start_session,
)
from pai.web.templating import render

router = portal_router()

WRONG_CREDENTIALS = "Wrong user name or password."


@router.get("/login", name="portal.login")
def login_form(request: Request, next: str = "/") -> HTMLResponse:
    return _login_page(request, next=next)


@router.post("/login")
def submit_login(
    request: Request,
    context: Context,
    client: ClientAddress,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    secret = request.cookies.get(LOGIN_COOKIE)
    if secret is None:
        problem = "Your browser did not keep this site's cookie: allow cookies and try again."
        return _login_page(request, next=next, username=username, problem=problem, status=400)
    if not hmac.compare_digest(csrf_token.encode(), form_token(secret).encode()):
        problem = "This login form has expired: try again."
        return _login_page(request, next=next, username=username, problem=problem, status=400)
    try:
        answer = log_in(context, client, LoginRequest(username=username, password=password))
    except ValidationError:
        problem = "Enter your user name and password."
        return _login_page(request, next=next, username=username, problem=problem, status=400)
    except (NoUserError, IncorrectPasswordError):
        return _login_page(
            request, next=next, username=username, problem=WRONG_CREDENTIALS, status=400
        )
    except PaiError as refused:  # too many attempts
        return _login_page(
            request,
            next=next,
            username=username,
            problem=refused.message,
            status=refused.status,
            headers=refused.headers,
        )
    response = redirect(_local(next))
    start_session(request, response, answer.token)
    return response


@router.get("/logout")
def confirm_logout(request: Request, visitor: CurrentVisitor) -> HTMLResponse:
    """Logging out changes something, so it is a form; an address typed by hand asks first."""
    return render(request, "logout.html")


@router.post("/logout", name="portal.logout")
def submit_logout(context: Context, visitor: FormVisitor) -> Response:
    logout(context, visitor.principal)
    response = redirect("/login", "You are logged out.")
    end_session(response)
    return response


def _login_page(
    request: Request,
    *,
    next: str,
    username: str = "",
    problem: str | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    secret = login_secret(request)
    response = render(
        request,
        "login.html",
        status_code=status,
        headers=headers,
        next=_local(next),
        username=username,
        problem=problem,
        csrf_token=form_token(secret),
    )
    keep_login_secret(request, response, secret)
    return response


def _local(target: str) -> str:
    """`target` if it is a path of this site, else the home page (no open redirects)."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"
