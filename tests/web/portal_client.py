"""The portal over plain HTTP, as a browser sends it: forms with their anti-forgery token."""

from __future__ import annotations

import re

import httpx

from server.harness import Credentials, RunningServer

_FORM_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def form_token(page: httpx.Response) -> str:
    found = _FORM_TOKEN.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def send_login(client: httpx.Client, username: str, password: str, **form: str) -> httpx.Response:
    """Send the login form as a browser does: load it, then post it with its token."""
    token = form_token(client.get("/login"))
    data = {"username": username, "password": password, "csrf_token": token, **form}
    return client.post("/login", data=data)


def log_in(server: RunningServer, username: str, password: str, **form: str) -> httpx.Response:
    """The answer to a login from a new browser."""
    return send_login(httpx.Client(base_url=server.base_url), username, password, **form)


class Visitor:
    """A logged-in browser session, without the browser."""

    def __init__(self, server: RunningServer, credentials: Credentials) -> None:
        self.client = httpx.Client(base_url=server.base_url)
        answer = send_login(self.client, credentials.username, credentials.password)
        assert answer.status_code == 303, answer.text
        self.form_token = form_token(self.client.get("/account"))

    def post(self, path: str, **data: str | list[str]) -> httpx.Response:
        """Send a form of the portal, with this session's token."""
        return self.client.post(path, data={"csrf_token": self.form_token, **data})
