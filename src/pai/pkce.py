"""Proof Key for Code Exchange (RFC 7636, S256): whoever starts a sign-in keeps a random
verifier and shows only its hash; the code the sign-in ends with is worth nothing to anyone
who intercepts it without the verifier. PAI uses it towards the OpenID Connect provider, and
its own clients (the portal, `pai login`) use it towards PAI."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets


def new_verifier() -> str:
    """43 characters from 32 random bytes (RFC 7636 asks for 43 to 128)."""
    return secrets.token_urlsafe(32)


def challenge(verifier: str) -> str:
    """The S256 challenge of `verifier`: base64url of its SHA-256, without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verifies(verifier: str, expected_challenge: str) -> bool:
    """Whether `verifier` is the one `expected_challenge` was made from."""
    try:
        made = challenge(verifier)
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(made, expected_challenge)
