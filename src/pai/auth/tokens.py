"""Issuing, verifying and revoking tokens.

A token is a JWT (HS256, signed with the cluster secret) with the payload `{username,
application, iat, exp?, jti}`. A valid signature is not enough: every issued token is recorded
by its SHA-256, verification requires the record, and revoking deletes it. User tokens expire;
application tokens (for scripts and tools) do not. Expired records are purged lazily.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import jwt
from sqlalchemy.orm import Session

from pai.errors import ForbiddenUserError, UnauthorizedUserError
from pai.store import identity
from pai.store.models import Token, User
from pai.store.types import utcnow

ALGORITHM = "HS256"
LAST_USED_RESOLUTION = timedelta(minutes=1)
"""`last_used_at` is refreshed at most this often, so reads do not all turn into writes."""
MAX_DECODED = 100_000
"""Most checked tokens remembered at once (then all are forgotten and checked again)."""
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


def token_hash(token: str) -> str:
    """The SHA-256 (hex) under which a token is recorded; useless as a credential."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenClaims:
    """What a correctly signed token says about its bearer."""

    username: str
    application: bool
    issued_at: datetime
    expires_at: datetime | None
    token_hash: str


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token: the only moment its clear text exists on the server."""

    token: str = field(repr=False)
    record: Token


class TokenService:
    """Issues and checks tokens signed with one cluster secret."""

    def __init__(self, secret_key: bytes, *, clock: Callable[[], datetime] = utcnow) -> None:
        self._key = secret_key
        self._clock = clock
        self._decoded: dict[str, TokenClaims] = {}
        """Token hash -> its claims: a signature, once checked, stays good, and checking it
        (base64, JSON, HMAC) was the largest part of authenticating a request."""

    def issue(self, session: Session, user: User, *, lifetime: timedelta | None) -> IssuedToken:
        """A new token for `user`: a user token expiring after `lifetime`, or an application
        token (which never expires) when `lifetime` is None."""
        now = self._clock()
        identity.delete_expired_tokens(session, now)
        application = lifetime is None
        payload: dict[str, object] = {
            "username": user.username,
            "application": application,
            "iat": int(now.timestamp()),
            "jti": secrets.token_urlsafe(16),
        }
        expires_at = None if lifetime is None else now + lifetime
        if expires_at is not None:
            payload["exp"] = int(expires_at.timestamp())
        token = jwt.encode(payload, self._key, algorithm=ALGORITHM)
        record = Token(
            token_hash=token_hash(token),
            user=user,
            application=application,
            created_at=now,
            expires_at=expires_at,
        )
        session.add(record)
        session.flush()
        return IssuedToken(token=token, record=record)

    def decode(self, token: str) -> TokenClaims:
        """Check the signature and expiry of `token` (not whether it was revoked)."""
        digest = token_hash(token)
        claims = self._decoded.get(digest)
        if claims is None:
            claims = self._checked_claims(token, digest)
            if len(self._decoded) >= MAX_DECODED:
                self._decoded.clear()
            self._decoded[digest] = claims
        elif claims.expires_at is not None and claims.expires_at <= datetime.now(UTC):
            raise UnauthorizedUserError("the token has expired")
        return claims

    def _checked_claims(self, token: str, digest: str) -> TokenClaims:
        try:
            payload = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                options={"require": ["username", "application", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise UnauthorizedUserError("the token has expired") from None
        except jwt.InvalidTokenError:
            raise UnauthorizedUserError("the token is not valid for this cluster") from None
        username, application = payload["username"], payload["application"]
        if not isinstance(username, str) or not isinstance(application, bool):
            raise UnauthorizedUserError("the token is not valid for this cluster")
        expires = payload.get("exp")
        return TokenClaims(
            username=username,
            application=application,
            issued_at=datetime.fromtimestamp(payload["iat"], UTC),
            expires_at=None if expires is None else datetime.fromtimestamp(expires, UTC),
            token_hash=digest,
        )

    def verify(self, session: Session, claims: TokenClaims) -> identity.TokenBearer:
        """The bearer (user and groups) of the decoded token `claims` if it is still recorded
        (not revoked); `UnauthorizedUserError` otherwise. It only reads: see `use_to_record`."""
        bearer = identity.find_token_bearer(session, claims.token_hash)
        if bearer is None or bearer.username != claims.username:
            raise UnauthorizedUserError("the token has been revoked")
        self.check_expiry(bearer)
        return bearer

    def check_expiry(self, bearer: identity.TokenBearer) -> None:
        """Refuse a token past the expiry recorded with it."""
        if bearer.expires_at is not None and bearer.expires_at <= self._clock():
            raise UnauthorizedUserError("the token has expired")

    def use_to_record(self, bearer: identity.TokenBearer) -> datetime | None:
        """When to record as the token's last use (now), or None while the recorded one is
        recent enough: `last_used_at` is written at most once per `LAST_USED_RESOLUTION`."""
        now = self._clock()
        if bearer.last_used_at is None or now - bearer.last_used_at >= LAST_USED_RESOLUTION:
            return now
        return None

    def revoke(self, session: Session, owner: User, reference: str) -> None:
        """Revoke one of `owner`'s tokens, named by the token itself or by its SHA-256.

        Revoking a token that no longer exists succeeds (DELETE is idempotent); revoking
        somebody else's token is forbidden.
        """
        digest = reference.lower() if _SHA256_HEX.fullmatch(reference) else token_hash(reference)
        record = identity.find_token(session, digest)
        if record is None:
            return
        if record.user_id != owner.id:
            raise ForbiddenUserError("you can only revoke your own tokens")
        session.delete(record)

    def live_tokens(self, session: Session, user: User) -> Sequence[Token]:
        """The user's tokens that can still be used, newest first."""
        return identity.live_tokens(session, user, self._clock())
