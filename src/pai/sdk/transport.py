"""HTTP to one PAI server: authentication, error answers as exceptions, unreachable servers.

Everything the client does goes through `Transport.request`, so a caller sees exactly two kinds
of failure: a `PaiError` subclass for an error answer, and `ServerUnavailableError` when no
answer came (naming the URL it tried).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

import pai
from pai.sdk.config import API_PATH, normalize_server
from pai.sdk.errors import ServerUnavailableError, error_from_response

DEFAULT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0

Params = Mapping[str, str | int]


class Transport:
    """An httpx client rooted at `<server>/api/v2` that sends the token, if any, as a Bearer
    token, and only to that server."""

    def __init__(self, server: str, token: str | None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.server = normalize_server(server)
        self.api_url = f"{self.server}{API_PATH}"
        self.timeout = timeout
        self.has_token = bool(token)
        headers = {"User-Agent": f"pai-sdk/{pai.__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.api_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        content: str | bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send a request to `path` (under `/api/v2`); raise the `PaiError` of an error answer.
        `content` may be an iterable of bytes, streamed as it is read."""
        request = self._http.build_request(
            method, path, params=params, json=json, content=content, headers=headers
        )
        with self._reaching():
            response = self._http.send(request)
        if response.is_error:
            raise error_from_response(response)
        return response

    def get(self, path: str, params: Params | None = None) -> Any:
        """The JSON answer of `GET path`."""
        return self.request("GET", path, params=params).json()

    def send(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of a request with a JSON body (None: no body)."""
        return self.request(method, path, json=body).json()

    @contextmanager
    def stream(
        self, url: str, *, params: Params | None = None, follow: bool = False
    ) -> Iterator[httpx.Response]:
        """A streamed `GET url`; `url` is a path under `/api/v2` or an absolute URL.

        The token goes only to this server: an absolute URL elsewhere is fetched without it.
        `follow` lifts the read timeout, for answers that last as long as a task runs.
        """
        request = self._http.build_request("GET", url, params=params)
        if not self._same_origin(str(request.url)):
            request.headers.pop("Authorization", None)
        if follow:
            request.extensions["timeout"] = httpx.Timeout(
                self.timeout, connect=CONNECT_TIMEOUT, read=None
            ).as_dict()
        with self._reaching():
            response = self._http.send(request, stream=True)
        try:
            if response.is_error:
                response.read()
                raise error_from_response(response)
            with self._reaching():
                yield response
        finally:
            response.close()

    def _same_origin(self, url: str) -> bool:
        target, own = urlsplit(url), urlsplit(self.server)
        return (target.scheme, target.netloc) == (own.scheme, own.netloc)

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turn "no answer" into `ServerUnavailableError` naming the server."""
        try:
            yield
        except httpx.TimeoutException:
            raise ServerUnavailableError(
                None, None, f"the PAI server at {self.server} did not answer in time"
            ) from None
        except httpx.TransportError as exc:
            raise ServerUnavailableError(
                None, None, f"cannot reach the PAI server at {self.server}: {_reason(exc)}"
            ) from None


def _reason(error: Exception) -> str:
    """`connection refused` from `[Errno 111] Connection refused`."""
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(error)).strip()
    return (text[:1].lower() + text[1:]) if text else type(error).__name__
