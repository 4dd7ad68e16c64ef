"""Where a sign-in may send the browser back: no open redirect.

Only two kinds of address are accepted: a page of this site (a path, or a URL of the site's
own origin), and a loopback address with a port, where a command-line client on the user's
machine listens (RFC 8252 §7.3). A login code sent there is worth nothing without the
client's PKCE verifier.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlencode, urljoin, urlsplit

from pai.errors import InvalidParametersError

MAX_LENGTH = 2048
LOOPBACK_HOSTS = ("localhost",)


def checked_redirect(redirect_uri: str, site: str) -> str:
    """`redirect_uri` as an absolute URL if it is allowed (see the module docstring);
    `site` is this site's base URL (`http://host:port`). InvalidParametersError otherwise."""
    if (
        len(redirect_uri) > MAX_LENGTH
        or any(ord(character) < 0x21 or character == "\\" for character in redirect_uri)
        or "#" in redirect_uri
    ):
        raise _refused(redirect_uri)
    if redirect_uri.startswith("/") and not redirect_uri.startswith("//"):
        return urljoin(site.rstrip("/") + "/", redirect_uri)
    try:
        target, own = urlsplit(redirect_uri), urlsplit(site)
        port = target.port
    except ValueError:  # a port that is not a number
        raise _refused(redirect_uri) from None
    if target.username is not None or target.password is not None:
        raise _refused(redirect_uri)
    if (target.scheme, target.netloc.lower()) == (own.scheme, own.netloc.lower()):
        return redirect_uri
    if target.scheme == "http" and port is not None and _loopback(target.hostname):
        return redirect_uri
    raise _refused(redirect_uri)


def with_query(url: str, **parameters: str) -> str:
    """`url` with `parameters` added to its query."""
    return f"{url}{'&' if urlsplit(url).query else '?'}{urlencode(parameters)}"


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refused(redirect_uri: str) -> InvalidParametersError:
    shown = redirect_uri if len(redirect_uri) <= 200 else redirect_uri[:200] + "..."
    return InvalidParametersError(
        f"redirect_uri: {shown!r} is neither a page of this site nor a loopback address "
        "(http://127.0.0.1:PORT/...); PAI sends sign-ins nowhere else"
    )
