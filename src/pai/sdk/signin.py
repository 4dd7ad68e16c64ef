"""Signing in through the cluster's OpenID Connect provider from a program on the user's
machine (what `pai login` does when the cluster uses one).

The program listens on a loopback port, sends the person's browser to the cluster's sign-in
with that port as the way back (RFC 8252) and the challenge of a PKCE verifier it keeps, and
waits. The browser comes back with a login code, which only this program can exchange for a
token: the code alone, seen in the browser's history, is worth nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from pai import pkce
from pai.sdk.config import normalize_server
from pai.sdk.errors import UnauthorizedError, WaitTimeoutError
from pai.sdk.identity import LoginResult
from pai.sdk.transport import DEFAULT_TIMEOUT, Transport

CALLBACK_PATH = "/callback"
DEFAULT_WAIT_SECONDS = 300.0
SIGNED_IN_PAGE = (
    "<!doctype html><meta charset='utf-8'><title>PAI</title>"
    "<p>{message}</p><p>You can close this tab and go back to the terminal.</p>"
)


@dataclass(frozen=True)
class AuthnInfo:
    """How a cluster signs people in (`GET /authn/info`)."""

    mode: str
    """`basic`, `ldap` or `oidc`."""
    provider: str


def authn_info(server: str, *, timeout: float = DEFAULT_TIMEOUT) -> AuthnInfo:
    anonymous = Transport(server, None, timeout=timeout)
    try:
        body = anonymous.get("/authn/info")
    finally:
        anonymous.close()
    mode = body.get("mode") or ("oidc" if body.get("authn_type") == "OIDC" else "basic")
    return AuthnInfo(mode=mode, provider=body.get("provider") or "the provider")


def sign_in_through_provider(
    server: str,
    show: Callable[[str], None],
    *,
    expiration: int | None = None,
    wait: float = DEFAULT_WAIT_SECONDS,
    timeout: float = DEFAULT_TIMEOUT,
) -> LoginResult:
    """Sign in through the cluster's provider: `show(url)` is given the address the person
    must open in a browser (open it, print it); then wait up to `wait` seconds for the browser
    to come back. `UnauthorizedError` if the sign-in is refused, `WaitTimeoutError` if the
    browser never comes back."""
    answers: list[dict[str, str]] = []

    class Callback(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = urlsplit(self.path)
            if target.path != CALLBACK_PATH:
                self.send_error(404)
                return
            query = {key: values[0] for key, values in parse_qs(target.query).items()}
            answers.append(query)
            refused = query.get("error_description") or query.get("error")
            message = f"Sign-in refused: {refused}" if refused else "You are signed in to PAI."
            page = SIGNED_IN_PAGE.format(message=_html_text(message)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the query holds the login code: never print it

    verifier = pkce.new_verifier()
    with HTTPServer(("127.0.0.1", 0), Callback) as listener:
        port = listener.server_address[1]
        query = urlencode(
            {
                "redirect_uri": f"http://127.0.0.1:{port}{CALLBACK_PATH}",
                "code_challenge": pkce.challenge(verifier),
            }
        )
        show(f"{normalize_server(server)}/api/v2/authn/oidc/login?{query}")
        _wait_for_answer(listener, answers, wait)
    answer = answers[0]
    if "code" not in answer:
        refused = answer.get("error_description") or answer.get("error") or "no login code"
        raise UnauthorizedError(401, answer.get("error"), f"sign-in refused: {refused}")
    body: dict[str, Any] = {"code": answer["code"], "codeVerifier": verifier}
    if expiration is not None:
        body["expiration"] = expiration
    anonymous = Transport(server, None, timeout=timeout)
    try:
        return LoginResult.model_validate(anonymous.send("POST", "/authn/oidc/token", body))
    finally:
        anonymous.close()


def _wait_for_answer(listener: Any, answers: list[dict[str, str]], wait: float) -> None:
    deadline = time.monotonic() + wait
    while not answers:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeoutError(
                f"no sign-in came back within {wait:g} s; run `pai login` again", None
            )
        listener.timeout = min(left, 1.0)
        listener.handle_request()


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
