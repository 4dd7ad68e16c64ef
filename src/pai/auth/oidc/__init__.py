"""Signing in through an OpenID Connect provider (authorization code flow with PKCE)."""

from pai.auth.oidc.idtoken import IdTokenRefused, verify_id_token
from pai.auth.oidc.provider import OidcProvider
from pai.auth.oidc.signin import OidcSignIn

__all__ = ["IdTokenRefused", "OidcProvider", "OidcSignIn", "verify_id_token"]
