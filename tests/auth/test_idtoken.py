"""ID token checks that a provider in a test cannot be made to fail: keys and algorithms an
attacker would choose."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from pai.auth.oidc.idtoken import IdTokenRefused, verify_id_token

ISSUER = "https://login.example.org"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": ISSUER,
        "sub": "1",
        "aud": "pai",
        "iat": now,
        "exp": now + 300,
        "nonce": "n-1",
        **changes,
    }


def verify(token: str) -> dict[str, Any]:
    return verify_id_token(
        token,
        find_key=lambda kid, alg: KEY.public_key(),
        issuer=ISSUER,
        client_id="pai",
        nonce="n-1",
        algorithms=["RS256", "HS256"],
    )


def test_a_token_signed_by_the_providers_key_passes() -> None:
    assert verify(jwt.encode(claims(), KEY, algorithm="RS256"))["sub"] == "1"


def test_an_hmac_signed_token_is_refused() -> None:
    """The provider announces HS256 too, but its key would be the client secret, or, for an
    attacker confusing algorithms, the provider's public key: only asymmetric ones pass."""
    forged = jwt.encode(claims(), "a-secret-anybody-could-choose", algorithm="HS256")
    with pytest.raises(IdTokenRefused, match="signed with 'HS256', which PAI does not accept"):
        verify(forged)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"iat": int(time.time()) + 3600}, "issued in the future"),
        ({"iss": "https://evil.example.org"}, "not issued by https://login.example.org"),
        ({"aud": ["pai", "other"], "azp": "other"}, "issued to 'other', not 'pai'"),
    ],
)
def test_claims_that_do_not_fit_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(IdTokenRefused, match=message):
        verify(jwt.encode(claims(**changes), KEY, algorithm="RS256"))


def test_a_small_clock_skew_is_allowed() -> None:
    now = int(time.time())
    assert verify(jwt.encode(claims(exp=now - 30), KEY, algorithm="RS256"))
