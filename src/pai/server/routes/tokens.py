"""`/api/v2/tokens`: list, create and revoke tokens."""

from __future__ import annotations

from fastapi import APIRouter

from pai.auth.directory import Directory
from pai.server.deps import Caller, Context, UserTokenCaller
from pai.server.errors import error_responses
from pai.server.login import LOGIN_BODY
from pai.server.routes.authn import ClientAddress, LoginBody, log_in
from pai.server.schemas import (
    ApplicationToken,
    LoginResponse,
    Message,
    TokenCheck,
    TokenList,
)
from pai.server.views import token_info

router = APIRouter(prefix="/tokens", tags=["tokens"])


@router.get("", response_model=TokenList, responses=error_responses(401, 403))
def list_tokens(context: Context, caller: UserTokenCaller) -> TokenList:
    """The caller's live tokens, described by their hashes (clear tokens are never stored)."""
    with context.database.reading() as session:
        user = Directory(session).user(caller.username)
        records = context.tokens.live_tokens(session, user)
        details = [token_info(record) for record in records]
        return TokenList(tokens=[detail.tokenHash for detail in details], details=details)


@router.post(
    "", response_model=LoginResponse, responses=error_responses(400, 429), openapi_extra=LOGIN_BODY
)
def create_token(body: LoginBody, context: Context, client: ClientAddress) -> LoginResponse:
    """Same as POST /api/v2/authn/basic/login."""
    return log_in(context, client, body)


@router.post("/application", response_model=ApplicationToken, responses=error_responses(401, 403))
def create_application_token(context: Context, caller: UserTokenCaller) -> ApplicationToken:
    """A token that never expires, for scripts and tools (revoke it with DELETE)."""
    with context.database.session() as session:
        user = Directory(session).user(caller.username)
        issued = context.tokens.issue(session, user, lifetime=None)
        return ApplicationToken(token=issued.token, application=True)


@router.get("/check", response_model=TokenCheck, responses=error_responses(401))
def check_token(caller: Caller) -> TokenCheck:
    """The decoded payload of the calling token, if it is live."""
    token = caller.token
    return TokenCheck(
        username=token.username,
        application=token.application,
        admin=caller.admin,
        iat=int(token.issued_at.timestamp()),
        exp=None if token.expires_at is None else int(token.expires_at.timestamp()),
    )


@router.delete("/{token}", response_model=Message, responses=error_responses(401, 403))
def revoke_token(token: str, context: Context, caller: Caller) -> Message:
    """Revoke one of the caller's tokens, given as the token or as its `tokenHash`."""
    with context.database.session() as session:
        context.tokens.revoke(session, Directory(session).user(caller.username), token)
    return Message(message="the token is revoked")
