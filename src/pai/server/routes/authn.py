"""`/api/v2/authn`: what the sign-in mode is, basic login (PAI's passwords or the LDAP
directory's) and logout, and sign-in through an OpenID Connect provider (OpenPAI's
`/oidc/login`, `/oidc/return`, `/oidc/logout`, plus PAI's `POST /oidc/token`, where a client
exchanges the login code a sign-in ended with; see `pai.auth.oidc.signin`)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from pai.auth.oidc import OidcSignIn
from pai.auth.oidc.redirects import checked_redirect, with_query
from pai.auth.permissions import Grants
from pai.errors import (
    ForbiddenUserError,
    IncorrectPasswordError,
    InvalidParametersError,
    NoApiError,
    NoUserError,
    PaiError,
    UnauthorizedUserError,
)
from pai.server.context import ServerContext
from pai.server.deps import Context, UserTokenCaller, client_address
from pai.server.errors import error_responses
from pai.server.login import LOGIN_BODY, login_request
from pai.server.schemas import AuthnInfo, LoginRequest, LoginResponse, Message, OidcTokenRequest
from pai.server.signin import PORTAL_SIGN_IN_PATH, local_path, site_url
from pai.store import identity
from pai.store.models import User

DEFAULT_TOKEN_LIFETIME = 86400
LOGIN_PATH = "/api/v2/authn/basic/login"
OIDC_LOGIN_PATH = "/api/v2/authn/oidc/login"
OIDC_RETURN_PATH = "/api/v2/authn/oidc/return"
OIDC_LOGOUT_PATH = "/api/v2/authn/oidc/logout"

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/authn", tags=["authentication"])

ClientAddress = Annotated[str, Depends(client_address)]
LoginBody = Annotated[LoginRequest, Depends(login_request)]
FAILED_LOGINS = (NoUserError, IncorrectPasswordError, ForbiddenUserError, UnauthorizedUserError)
"""Refusals that count against the failed-login limit of an account and address."""


@router.get("/info", response_model=AuthnInfo)
def authn_info(context: Context) -> AuthnInfo:
    """How to log in: OpenPAI's `basic` or `OIDC`, and PAI's `mode` and provider name."""
    authn = context.settings.authn
    if authn.oidc is not None:
        return AuthnInfo(
            authn_type="OIDC",
            loginURI=OIDC_LOGIN_PATH,
            loginURIMethod="get",
            mode="oidc",
            provider=authn.oidc.display_name,
        )
    mode = "ldap" if authn.mode == "ldap" else "basic"
    return AuthnInfo(
        authn_type="basic", loginURI=LOGIN_PATH, loginURIMethod="post", mode=mode, provider=""
    )


@router.post(
    "/basic/login",
    response_model=LoginResponse,
    responses=error_responses(400, 403, 429, 503),
    openapi_extra=LOGIN_BODY,
)
def login(body: LoginBody, context: Context, client: ClientAddress) -> LoginResponse:
    """Exchange a user name and password for a user token (JSON or form-encoded body). In
    `ldap` mode the directory checks the password; in `oidc` mode only local administrators
    log in here."""
    return log_in(context, client, body)


@router.delete("/basic/logout", response_model=Message, responses=error_responses(401, 403))
def logout(context: Context, caller: UserTokenCaller) -> Message:
    """Revoke the token this request was made with."""
    with context.database.session() as session:
        record = identity.find_token(session, caller.token.token_hash)
        if record is not None:
            session.delete(record)
    return Message(message="logged out")


@router.get(
    "/oidc/login",
    status_code=302,
    response_class=RedirectResponse,
    responses={
        302: {"description": "To the provider's sign-in page"},
        **error_responses(400, 404, 503),
    },
)
def oidc_login(
    request: Request,
    context: Context,
    redirect_uri: Annotated[
        str,
        Query(
            description="Where the browser comes back with `code`: a page of this site, "
            "or http://127.0.0.1:PORT/... for a command-line client."
        ),
    ] = "/",
    code_challenge: Annotated[
        str | None,
        Query(
            description="S256 challenge of the client's PKCE verifier; without it, the "
            "portal's sign-in starts (it keeps the verifier for the browser)."
        ),
    ] = None,
) -> RedirectResponse:
    """Start a sign-in through the OpenID Connect provider: 302 to its sign-in page."""
    sign_in = _oidc(context)
    if code_challenge is None:
        target = with_query(PORTAL_SIGN_IN_PATH, next=local_path(redirect_uri))
        return RedirectResponse(target, status_code=302)
    site = site_url(request, context.settings)
    checked = checked_redirect(redirect_uri, site)
    with context.database.session() as session:
        provider_page = sign_in.begin(
            session,
            callback=site + OIDC_RETURN_PATH,
            redirect_uri=checked,
            code_challenge=code_challenge,
        )
    return RedirectResponse(provider_page, status_code=302)


@router.get(
    "/oidc/return",
    status_code=302,
    response_class=RedirectResponse,
    responses={
        302: {"description": "To the client, with `code` or `error`"},
        **error_responses(400, 404),
    },
)
def oidc_return(
    request: Request,
    context: Context,
    state: str = "",
    code: str = "",
    error: str = "",
    error_description: str = "",
) -> RedirectResponse:
    """Where the provider sends the browser back. The client's redirect URI gets a login code
    (`code`), or `error` and `error_description` saying why the sign-in was refused."""
    sign_in = _oidc(context)
    if not state:
        raise InvalidParametersError("state: missing; start the sign-in at " + OIDC_LOGIN_PATH)
    with context.database.session() as session:
        claimed = sign_in.claim(session, state)
    try:
        if error:
            raise UnauthorizedUserError(
                f"the provider did not sign you in: {error_description or error}"
            )
        if not code:
            raise InvalidParametersError("code: the provider sent no code")
        person = sign_in.identify(
            claimed, code=code, callback=site_url(request, context.settings) + OIDC_RETURN_PATH
        )
        with context.database.session() as session:
            login_code = sign_in.vouch(session, claimed, person)
    except PaiError as refused:
        logger.warning("sign-in through the OpenID Connect provider refused: %s", refused.message)
        with context.database.session() as session:
            sign_in.forget(session, claimed)
        answer = with_query(
            claimed.redirect_uri, error=refused.code, error_description=refused.message
        )
        return RedirectResponse(answer, status_code=302)
    logger.info("signed in through the OpenID Connect provider: %s", person.username)
    return RedirectResponse(with_query(claimed.redirect_uri, code=login_code), status_code=302)


@router.post("/oidc/token", response_model=LoginResponse, responses=error_responses(400, 401, 404))
def oidc_token(body: OidcTokenRequest, context: Context) -> LoginResponse:
    """PAI: exchange the login code of a finished sign-in, with the PKCE verifier of its
    `code_challenge`, for a user token (the same answer as basic login). A code works once."""
    return redeem_login_code(context, body.code, body.codeVerifier, body.expiration)


@router.get(
    "/oidc/logout",
    status_code=302,
    response_class=RedirectResponse,
    responses={
        302: {"description": "To the provider's sign-out, then `redirect_uri`"},
        **error_responses(400, 404),
    },
)
def oidc_logout(request: Request, context: Context, redirect_uri: str = "/") -> RedirectResponse:
    """End the browser's session with the provider, then come back to `redirect_uri` (a page
    of this site). PAI tokens are revoked with DELETE /api/v2/authn/basic/logout."""
    sign_in = _oidc(context)
    checked = checked_redirect(redirect_uri, site_url(request, context.settings))
    return RedirectResponse(sign_in.provider.logout_url(checked) or checked, status_code=302)


def log_in(context: ServerContext, client: str, body: LoginRequest) -> LoginResponse:
    """Check the password and issue a user token.

    Failed logins are limited per account and client address: guesses at one account lock
    out only that account from that address, never the other users behind the same proxy."""
    lifetime = _lifetime(context, body.expiration)
    attempt = f"{body.username} from {client}"
    with context.database.reading() as session:
        context.login_failures.ensure_allowed(session, attempt)
    try:
        person = context.password_logins.vouch(context.database, body.username, body.password)
        with context.database.session() as session:
            user = context.password_logins.authenticate(
                session, body.username, body.password, person
            )
            return _token_for(context, session, user, lifetime)
    except FAILED_LOGINS:
        with context.database.session() as session:
            context.login_failures.record(session, attempt)
        raise


def redeem_login_code(
    context: ServerContext, code: str, verifier: str, expiration: int | None = None
) -> LoginResponse:
    """A user token for the login code a sign-in through the provider ended with."""
    sign_in = _oidc(context)
    lifetime = _lifetime(context, expiration)
    with context.database.session() as session:
        taken = sign_in.take_code(session, code)
    user_id = sign_in.check(taken, verifier)
    with context.database.session() as session:
        user = session.get(User, user_id)
        if user is None:
            raise UnauthorizedUserError("the user of this sign-in no longer exists")
        return _token_for(context, session, user, lifetime)


def _lifetime(context: ServerContext, expiration: int | None) -> timedelta:
    cap = context.settings.token_max_expiration
    lifetime = expiration if expiration is not None else min(DEFAULT_TOKEN_LIFETIME, cap)
    if lifetime > cap:
        raise InvalidParametersError(f"body.expiration: must be at most {cap} seconds")
    return timedelta(seconds=lifetime)


def _token_for(
    context: ServerContext, session: Session, user: User, lifetime: timedelta
) -> LoginResponse:
    issued = context.tokens.issue(session, user, lifetime=lifetime)
    return LoginResponse(
        user=user.username,
        token=issued.token,
        admin=Grants.of_user(user).admin,
        hasGitHubPAT=bool(user.extension.get("githubPAT")),
    )


def _oidc(context: ServerContext) -> OidcSignIn:
    if context.oidc is None:
        raise NoApiError(
            f"this cluster does not sign in through OpenID Connect (PAI_AUTHN_MODE="
            f"{context.settings.authn.mode}); log in at {LOGIN_PATH}"
        )
    return context.oidc
