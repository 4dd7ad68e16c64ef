"""FastAPI dependencies: the server context, the authenticated caller, admin checks.

Those that do no blocking I/O are `async def`: FastAPI runs them on the event loop, where a
plain `def` would cost each request one more hand-off to the thread pool.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import Annotated

from fastapi import Depends, Request

from pai.auth.permissions import Principal
from pai.errors import ForbiddenUserError, UnauthorizedUserError
from pai.server.context import ServerContext
from pai.server.proxies import forwarded_client

CREDENTIAL_SCHEMES = {
    "HTTPBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from POST /api/v2/authn/basic/login.",
    },
    "HTTPBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "The user name and one of that user's application tokens as the password.",
    },
}
"""How `authenticate` takes credentials, as the OpenAPI document describes them."""


async def get_context(request: Request) -> ServerContext:
    context: ServerContext = request.app.state.context
    return context


Context = Annotated[ServerContext, Depends(get_context)]


async def client_address(request: Request) -> str:
    """The caller's address, a key of rate limits.

    Behind reverse proxies the connection comes from the last proxy: `X-Forwarded-For` then
    names the client, but only proxies the administrator trusts (`PAI_TRUSTED_PROXIES`) may
    say so, or any caller could pick the address it is counted under."""
    peer = request.client.host if request.client else "unknown"
    trusted = request.app.state.context.settings.trusted_proxies
    return forwarded_client(peer, request.headers.getlist("x-forwarded-for"), trusted)


async def authenticate(request: Request) -> Principal:
    """The caller, from `Bearer <token>` or `Basic base64(user:applicationToken)`.

    The header is read here rather than by FastAPI's security classes: every request of the API
    passes this way, and each dependency costs FastAPI a share of the request's time."""
    authorization = request.headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    token, basic_user = bearer_token(authorization), None
    if token is None and scheme.lower() == "basic" and credentials.strip():
        basic_user, token = _basic_credentials(credentials.strip())
    if token is None:
        raise UnauthorizedUserError(
            "authentication required: send 'Authorization: Bearer <token>' "
            "(POST /api/v2/authn/basic/login issues one)"
        )
    context: ServerContext = request.app.state.context
    caller = await context.authenticate_async(token)
    if basic_user is not None and (basic_user != caller.username or not caller.application):
        raise UnauthorizedUserError(
            "Basic authentication takes a user name and an application token of that user"
        )
    return caller


def bearer_token(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    return credentials if scheme.lower() == "bearer" and credentials else None


def _basic_credentials(encoded: str) -> tuple[str, str]:
    """The user name and password of a Basic credential."""
    try:
        decoded = b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise UnauthorizedUserError("Basic credentials must be base64 of 'user:token'") from None
    username, separator, password = decoded.partition(":")
    if not separator:
        raise UnauthorizedUserError("Basic credentials must be base64 of 'user:token'")
    return username, password


Caller = Annotated[Principal, Depends(authenticate)]


async def require_admin(caller: Caller) -> Principal:
    if not caller.admin:
        raise ForbiddenUserError(f"user '{caller.username}' is not an administrator")
    return caller


Admin = Annotated[Principal, Depends(require_admin)]


async def require_user_token(caller: Caller) -> Principal:
    """Some token operations are reserved to interactive (user) tokens."""
    if caller.application:
        raise ForbiddenUserError("an application token cannot do this; use a user token")
    return caller


UserTokenCaller = Annotated[Principal, Depends(require_user_token)]
