"""Checking an ID token (OpenID Connect Core §3.1.3.7): who the provider says signed in.

The token must be signed with one of the provider's published keys by an asymmetric algorithm
the provider announces (never `none`, never HMAC, whose key would be public here), be issued
by the configured issuer for this client, be unexpired (a small clock skew allowed), and carry
the nonce of this sign-in. Each refusal says which check failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import Any

import jwt

from pai.errors import UnauthorizedUserError

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
CLOCK_SKEW_SECONDS = 60
"""How far the provider's clock may be from PAI's."""
REQUIRED_CLAIMS = ("iss", "sub", "aud", "exp", "iat")

KeyFinder = Callable[[str | None, str], Any]
"""`(kid, alg) -> key`: the provider's public key; raises `IdTokenRefused` if there is none."""


class IdTokenRefused(UnauthorizedUserError):
    """The provider's ID token fails a check; the message says which."""


def verify_id_token(
    token: str,
    *,
    find_key: KeyFinder,
    issuer: str,
    client_id: str,
    nonce: str,
    algorithms: Collection[str],
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of `token` once every check passed; `IdTokenRefused` otherwise."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:
        raise IdTokenRefused("the provider's ID token is not a signed JWT") from None
    algorithm = header.get("alg")
    allowed = ASYMMETRIC_ALGORITHMS.intersection(algorithms)
    if algorithm not in allowed:
        raise IdTokenRefused(
            f"the ID token is signed with {algorithm!r}, which PAI does not accept "
            f"(accepted: {', '.join(sorted(allowed)) or 'none the provider announces'})"
        )
    key = find_key(header.get("kid"), algorithm)
    current = time.time() if now is None else now
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=client_id,
            issuer=issuer,
            leeway=CLOCK_SKEW_SECONDS,
            options={"require": list(REQUIRED_CLAIMS), "verify_iat": False},
        )
    except jwt.ExpiredSignatureError:
        expired = jwt.decode(token, options={"verify_signature": False}).get("exp")
        raise IdTokenRefused(
            f"the ID token expired at {_moment(expired)}: sign in again (if this repeats, "
            "the clocks of PAI and the provider disagree)"
        ) from None
    except jwt.InvalidSignatureError:
        raise IdTokenRefused(
            "the ID token's signature does not match the provider's key: it was forged or "
            "altered on the way"
        ) from None
    except jwt.InvalidAudienceError:
        raise IdTokenRefused(
            f"the ID token was issued for another client, not {client_id!r}"
        ) from None
    except jwt.InvalidIssuerError:
        raise IdTokenRefused(f"the ID token was not issued by {issuer}") from None
    except jwt.MissingRequiredClaimError as missing:
        raise IdTokenRefused(f"the ID token has no {missing.claim!r} claim") from None
    except jwt.InvalidTokenError as invalid:
        raise IdTokenRefused(f"the ID token is not valid: {invalid}") from None
    if claims["iat"] > current + CLOCK_SKEW_SECONDS:
        raise IdTokenRefused(
            f"the ID token claims to be issued in the future ({_moment(claims['iat'])})"
        )
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise IdTokenRefused(f"the ID token was issued to {claims.get('azp')!r}, not {client_id!r}")
    if claims.get("nonce") != nonce:
        raise IdTokenRefused(
            "the ID token was not issued for this sign-in (its nonce differs): start again"
        )
    return claims


def _moment(timestamp: Any) -> str:
    if not isinstance(timestamp, int | float):
        return "an unknown time"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
