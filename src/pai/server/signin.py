"""What the API's sign-in routes and the portal share: this site's address, and the portal's
page where a browser's sign-in through the provider starts (the portal keeps the browser's
PKCE verifier; the API only needs to send browsers there)."""

from __future__ import annotations

from fastapi import Request

from pai.settings import Settings

PORTAL_SIGN_IN_PATH = "/login/oidc"
"""The portal's start of a sign-in through the OpenID Connect provider (`?next=` a page)."""


def site_url(request: Request, settings: Settings) -> str:
    """This site's base URL as browsers reach it: `PAI_PUBLIC_URL`, else the request's."""
    return (settings.public_url or str(request.base_url)).rstrip("/")


def local_path(target: str) -> str:
    """`target` if it is a path of this site, else the home page (no open redirects)."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"
