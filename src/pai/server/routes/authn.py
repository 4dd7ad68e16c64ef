"""`/api/v2/authn`: basic (user name and password) login and logout."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends

from pai.auth.directory import Directory
from pai.auth.permissions import Grants
from pai.errors import IncorrectPasswordError, InvalidParametersError, NoUserError
from pai.server.deps import Context, UserTokenCaller, client_address
from pai.server.errors import error_responses
from pai.server.login import LOGIN_BODY, login_request
from pai.server.schemas import AuthnInfo, LoginRequest, LoginResponse, Message
from pai.store import identity

DEFAULT_TOKEN_LIFETIME = 86400
LOGIN_PATH = "/api/v2/authn/basic/login"

router = APIRouter(prefix="/authn", tags=["authentication"])

ClientAddress = Annotated[str, Depends(client_address)]
LoginBody = Annotated[LoginRequest, Depends(login_request)]


@router.get("/info", response_model=AuthnInfo)
def authn_info() -> AuthnInfo:
    return AuthnInfo(authn_type="basic", loginURI=LOGIN_PATH, loginURIMethod="post")


@router.post(
    "/basic/login",
    response_model=LoginResponse,
    responses=error_responses(400, 429),
    openapi_extra=LOGIN_BODY,
)
def login(body: LoginBody, context: Context, client: ClientAddress) -> LoginResponse:
    """Exchange a user name and password for a user token (JSON or form-encoded body)."""
    return log_in(context, client, body)


@router.delete("/basic/logout", response_model=Message, responses=error_responses(401, 403))
def logout(context: Context, caller: UserTokenCaller) -> Message:
    """Revoke the token this request was made with."""
    with context.database.session() as session:
        record = identity.find_token(session, caller.token.token_hash)
        if record is not None:
            session.delete(record)
    return Message(message="logged out")


def log_in(context: Context, client: str, body: LoginRequest) -> LoginResponse:
    """Check the password and issue a user token.

    Failed logins are limited per account and client address: guesses at one account lock
    out only that account from that address, never the other users behind the same proxy."""
    attempt = f"{body.username} from {client}"
    with context.database.reading() as session:
        context.login_failures.ensure_allowed(session, attempt)
    try:
        return _issue_token(context, body)
    except (NoUserError, IncorrectPasswordError):
        with context.database.session() as session:
            context.login_failures.record(session, attempt)
        raise


def _issue_token(context: Context, body: LoginRequest) -> LoginResponse:
    cap = context.settings.token_max_expiration
    lifetime = body.expiration if body.expiration is not None else min(DEFAULT_TOKEN_LIFETIME, cap)
    if lifetime > cap:
        raise InvalidParametersError(f"body.expiration: must be at most {cap} seconds")
    with context.database.session() as session:
        user = Directory(session).authenticate(body.username, body.password)
        issued = context.tokens.issue(session, user, lifetime=timedelta(seconds=lifetime))
        return LoginResponse(
            user=user.username,
            token=issued.token,
            admin=Grants.of_user(user).admin,
            hasGitHubPAT=bool(user.extension.get("githubPAT")),
        )
