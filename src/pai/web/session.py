"""Who is visiting: the session cookie, and the anti-forgery token every form carries.

The session cookie holds a user token issued at login, the same token the API accepts as
`Bearer`, so signing out anywhere (or a new password) ends the portal session too. Scripts
never see it (HttpOnly), other sites do not send it with their forms (SameSite=Lax), and it
only travels over https when the portal is served over https.

Every form and script request that changes something carries a token derived from the
session's secret (HMAC of the session token), so another site cannot make a visitor's browser
act for them: it can neither read the token nor compute it. The login form, sent before there
is a session, is bound the same way to a random value in a short-lived cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Response

from pai.auth.permissions import Principal
from pai.errors import ForbiddenUserError, UnauthorizedUserError
from pai.server.cookies import LOGIN_COOKIE, SESSION_COOKIE
from pai.server.deps import Context

LOGIN_COOKIE_SECONDS = 3600
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


@dataclass(frozen=True)
class Visitor:
    """A logged-in visitor of the portal."""

    principal: Principal
    csrf_token: str

    @property
    def username(self) -> str:
        return self.principal.username

    @property
    def admin(self) -> bool:
        return self.principal.admin


def form_token(secret: str) -> str:
    """The anti-forgery token of forms sent within the session (or login) holding `secret`."""
    return hmac.new(secret.encode(), b"pai-portal-form", hashlib.sha256).hexdigest()


def current_visitor(request: Request, context: Context) -> Visitor:
    """The visitor of this request; UnauthorizedUserError sends them to the login form."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        raise UnauthorizedUserError("log in to use the portal")
    principal = context.authenticate(token)
    if principal.application:
        raise UnauthorizedUserError("an application token cannot open a portal session")
    visitor = Visitor(principal, form_token(token))
    request.state.visitor = visitor  # error pages show the navigation of who is there
    return visitor


def require_admin(visitor: Annotated[Visitor, Depends(current_visitor)]) -> Visitor:
    if not visitor.admin:
        raise ForbiddenUserError(
            f"this page is for administrators, and '{visitor.username}' is not one"
        )
    return visitor


def check_token(sent: str | None, expected: str) -> None:
    """Refuse a request that does not carry the anti-forgery token `expected`."""
    if sent is None or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise ForbiddenUserError(
            "this form did not come from this portal page, or the page is from an earlier "
            "session: reload the page and try again"
        )


async def check_form_token(request: Request, expected: str) -> None:
    """Refuse a form that does not carry `expected` in its field (or header)."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(_FORM_TYPES):
        field = (await request.form()).get(CSRF_FIELD)
        sent = field if isinstance(field, str) else None
    check_token(sent, expected)


async def verified_visitor(
    request: Request, visitor: Annotated[Visitor, Depends(current_visitor)]
) -> Visitor:
    """The visitor, for a request that changes something: its anti-forgery token is checked."""
    await check_form_token(request, visitor.csrf_token)
    return visitor


def verified_script_visitor(
    request: Request, visitor: Annotated[Visitor, Depends(current_visitor)]
) -> Visitor:
    """The visitor, for a request of the portal's scripts, which send the token as a header
    (the body is theirs: it is not read as a form)."""
    check_token(request.headers.get(CSRF_HEADER), visitor.csrf_token)
    return visitor


async def verified_admin(
    request: Request, visitor: Annotated[Visitor, Depends(require_admin)]
) -> Visitor:
    await check_form_token(request, visitor.csrf_token)
    return visitor


CurrentVisitor = Annotated[Visitor, Depends(current_visitor)]
"""For pages that only read."""
Admin = Annotated[Visitor, Depends(require_admin)]
FormVisitor = Annotated[Visitor, Depends(verified_visitor)]
"""For every POST: the visitor, with the form's anti-forgery token checked."""
FormAdmin = Annotated[Visitor, Depends(verified_admin)]
ScriptVisitor = Annotated[Visitor, Depends(verified_script_visitor)]
"""For POSTs of the portal's scripts, with a body of their own."""


def start_session(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE, token, httponly=True, samesite="lax", secure=_over_https(request)
    )
    response.delete_cookie(LOGIN_COOKIE)


def end_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE)


def login_secret(request: Request) -> str:
    """The secret binding the login form to this browser: the cookie's, or a new one."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(32)


def keep_login_secret(request: Request, response: Response, secret: str) -> None:
    response.set_cookie(
        LOGIN_COOKIE,
        secret,
        max_age=LOGIN_COOKIE_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_over_https(request),
    )


def _over_https(request: Request) -> bool:
    return request.url.scheme == "https"
