"""FastAPI dependencies: the server context, the authenticated caller, admin checks, and the
rule that a query parameter is given once.

Those that do no blocking I/O are `async def`: FastAPI runs them on the event loop, where a
plain `def` would cost each request one more hand-off to the thread pool.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import (
    HTTPAuthorizationCredentials,
    HTTPBasic,
    HTTPBasicCredentials,
    HTTPBearer,
)

from pai.auth.permissions import Principal
from pai.errors import ForbiddenUserError, InvalidParametersError, UnauthorizedUserError
from pai.server.context import ServerContext
from pai.server.proxies import forwarded_client

_bearer = HTTPBearer(auto_error=False, description="A token from POST /api/v2/authn/basic/login.")
_basic = HTTPBasic(
    auto_error=False,
    description="The user name and one of that user's application tokens as the password.",
)


async def get_context(request: Request) -> ServerContext:
    context: ServerContext = request.app.state.context
    return context


Context = Annotated[ServerContext, Depends(get_context)]


async def single_valued_query(request: Request) -> None:
    """Every query parameter of the API takes one value (a list is comma-separated), so one
    given twice is refused, as OpenPAI's server does, rather than silently read as its last."""
    if not request.scope.get("query_string"):
        return
    counts = Counter(name for name, _ in request.query_params.multi_items())
    for name, count in counts.items():
        if count > 1:
            raise InvalidParametersError(
                f"query.{name}: given {count} times; give it once (a list is comma-separated)"
            )


async def client_address(request: Request) -> str:
    """The caller's address, a key of rate limits.

    Behind reverse proxies the connection comes from the last proxy: `X-Forwarded-For` then
    names the client, but only proxies the administrator trusts (`PAI_TRUSTED_PROXIES`) may
    say so, or any caller could pick the address it is counted under."""
    peer = request.client.host if request.client else "unknown"
    trusted = request.app.state.context.settings.trusted_proxies
    return forwarded_client(peer, request.headers.getlist("x-forwarded-for"), trusted)


async def authenticate(
    context: Context,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    basic: Annotated[HTTPBasicCredentials | None, Security(_basic)],
) -> Principal:
    """The caller, from `Bearer <token>` or `Basic base64(user:applicationToken)`."""
    if bearer is not None:
        token, basic_user = bearer.credentials, None
    elif basic is not None:
        token, basic_user = basic.password, basic.username
    else:
        raise UnauthorizedUserError(
            "authentication required: send 'Authorization: Bearer <token>' "
            "(POST /api/v2/authn/basic/login issues one)"
        )
    caller = await context.authenticate_async(token)
    if basic_user is not None and (basic_user != caller.username or not caller.application):
        raise UnauthorizedUserError(
            "Basic authentication takes a user name and an application token of that user"
        )
    return caller


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
