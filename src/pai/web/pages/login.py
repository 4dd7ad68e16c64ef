"""Logging in and out of the portal: with a user name and password (PAI's or the LDAP
directory's), or through the OpenID Connect provider ("Sign in with ...").

A sign-in through the provider starts here: the portal keeps a PKCE verifier in a cookie of
this browser, sends the browser to the API's `/oidc/login` with its challenge, and, when the
browser comes back with a login code, exchanges code and verifier for the session's token. A
code read from the address bar or a log is useless in another browser."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from pai import pkce
from pai.auth.oidc.redirects import with_query
from pai.errors import IncorrectPasswordError, NoUserError, PaiError
from pai.server.deps import Context
from pai.server.routes.authn import (
    OIDC_LOGIN_PATH,
    OIDC_LOGOUT_PATH,
    ClientAddress,
    log_in,
    logout,
    redeem_login_code,
)
from pai.server.schemas import LoginRequest
from pai.server.signin import PORTAL_SIGN_IN_PATH, local_path
from pai.settings import Settings
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
VERIFIER_COOKIE = "pai_sign_in"
"""The PKCE verifier of this browser's sign-in through the provider."""
SIGN_IN_SECONDS = 600
SIGN_IN_DONE_PATH = PORTAL_SIGN_IN_PATH + "/done"


@router.get("/login", name="portal.login")
def login_form(request: Request, context: Context, next: str = "/") -> HTMLResponse:
    return _login_page(request, context.settings, next=next)


@router.get(PORTAL_SIGN_IN_PATH, name="portal.sign_in")
def start_sign_in(request: Request, context: Context, next: str = "/") -> Response:
    """Send the browser to the provider, keeping the verifier of its sign-in here."""
    if context.oidc is None:  # the cluster signs in with passwords: their form
        return RedirectResponse(with_query("/login", next=local_path(next)), status_code=303)
    verifier = pkce.new_verifier()
    back = with_query(SIGN_IN_DONE_PATH, next=local_path(next))
    target = with_query(OIDC_LOGIN_PATH, redirect_uri=back, code_challenge=pkce.challenge(verifier))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        VERIFIER_COOKIE,
        verifier,
        max_age=SIGN_IN_SECONDS,
        path=PORTAL_SIGN_IN_PATH,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.get(SIGN_IN_DONE_PATH, name="portal.sign_in_done")
def finish_sign_in(
    request: Request,
    context: Context,
    next: str = "/",
    code: str = "",
    error_description: str = "",
) -> Response:
    """The browser is back from the provider: a session, or the login page saying why not."""
    verifier = request.cookies.get(VERIFIER_COOKIE)
    problem = None
    if not verifier:  # also keeps others' links from putting their words on this page
        problem = "This sign-in did not start in this browser, or took too long: try again."
    elif error_description or not code:
        problem = f"Sign-in refused: {error_description or 'the provider sent no code'}"
    else:
        try:
            answer = redeem_login_code(context, code, verifier)
        except PaiError as refused:
            problem = f"Sign-in refused: {refused.message}"
    if problem is not None:
        response: Response = _login_page(
            request, context.settings, next=next, problem=problem, status=401
        )
    else:
        response = redirect(local_path(next))
        start_session(request, response, answer.token)
    response.delete_cookie(VERIFIER_COOKIE, path=PORTAL_SIGN_IN_PATH)
    return response


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
    settings = context.settings
    secret = request.cookies.get(LOGIN_COOKIE)
    if secret is None:
        problem = "Your browser did not keep this site's cookie: allow cookies and try again."
        return _login_page(
            request, settings, next=next, username=username, problem=problem, status=400
        )
    if not hmac.compare_digest(csrf_token.encode(), form_token(secret).encode()):
        problem = "This login form has expired: try again."
        return _login_page(
            request, settings, next=next, username=username, problem=problem, status=400
        )
    try:
        answer = log_in(context, client, LoginRequest(username=username, password=password))
    except ValidationError:
        problem = "Enter your user name and password."
        return _login_page(
            request, settings, next=next, username=username, problem=problem, status=400
        )
    except (NoUserError, IncorrectPasswordError):
        return _login_page(
            request, settings, next=next, username=username, problem=WRONG_CREDENTIALS, status=400
        )
    except PaiError as refused:  # too many attempts, a directory that cannot be asked
        return _login_page(
            request,
            settings,
            next=next,
            username=username,
            problem=refused.message,
            status=refused.status,
            headers=refused.headers,
        )
    response = redirect(local_path(next))
    start_session(request, response, answer.token)
    return response


@router.get("/logout")
def confirm_logout(request: Request, visitor: CurrentVisitor) -> HTMLResponse:
    """Logging out changes something, so it is a form; an address typed by hand asks first."""
    return render(request, "logout.html")


@router.post("/logout", name="portal.logout")
def submit_logout(context: Context, visitor: FormVisitor) -> Response:
    """End the PAI session; in `oidc` mode also the provider's, so that "Sign in" asks again."""
    logout(context, visitor.principal)
    if context.oidc is not None:
        response: Response = RedirectResponse(
            with_query(OIDC_LOGOUT_PATH, redirect_uri="/login"), status_code=303
        )
    else:
        response = redirect("/login", "You are logged out.")
    end_session(response)
    return response


def _login_page(
    request: Request,
    settings: Settings,
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
        next=local_path(next),
        username=username,
        problem=problem,
        csrf_token=form_token(secret),
        mode=settings.authn.mode,
        provider=settings.authn.oidc.display_name if settings.authn.oidc else "",
    )
    keep_login_secret(request, response, secret)
    return response
