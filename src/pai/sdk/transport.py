"""HTTP to one PAI server: authentication, error answers as exceptions, unreachable servers.

Everything the client does goes through `Transport.request`, so a caller sees exactly two kinds
of failure: a `PaiError` subclass for an error answer, and `ServerUnavailableError` when no
answer came (naming the URL it tried).

What is safe to try again is tried again, for up to `retry_for` seconds with growing pauses
(or the `Retry-After` the server asks for, up to `MAX_PAUSE`): reads, and requests the caller
marks so (a submission named by its submission id), when no answer came or the server answered
503 (not ready: its store restarting) or 507 (its store's disk full). A server whose TLS
certificate is not trusted is refused at once: that does not pass by itself. `on_retry` hears
when a request starts waiting, so that a person is not left looking at a silent terminal.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

import pai
from pai.sdk.config import API_PATH, normalize_server
from pai.sdk.connections import Connections
from pai.sdk.errors import (
    PaiError,
    ServerNotTrustedError,
    ServerUnavailableError,
    error_from_response,
)

DEFAULT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
RETRY_FOR = 20.0
"""Seconds a request that may be repeated is tried again for, at most."""
FIRST_PAUSE = 0.25
MAX_PAUSE = 4.0
RETRIED_STATUSES = (503, 507)
SAFE_METHODS = ("GET", "HEAD")

Params = Mapping[str, str | int]
T = TypeVar("T")
RetryListener = Callable[[PaiError, float], None]
"""Called once per request that starts waiting: the error, and the most seconds it will wait."""


class Transport:
    """An httpx client rooted at `<server>/api/v2` that sends the token, if any, as a Bearer
    token, and only to that server."""

    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry_for: float = RETRY_FOR,
        on_retry: RetryListener | None = None,
        connections: httpx.BaseTransport | None = None,
    ) -> None:
        """`connections`: how requests reach the server (default `Connections()`); one that
        wraps it sees every exchange, as a chaos run records them."""
        self.server = normalize_server(server)
        self.api_url = f"{self.server}{API_PATH}"
        self.timeout = timeout
        self.retry_for = retry_for
        self.on_retry = on_retry
        self.has_token = bool(token)
        headers = {"User-Agent": f"pai-sdk/{pai.__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.api_url,
            headers=headers,
            timeout=timeout,
            transport=connections or Connections(),
        )

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
        repeatable: bool = False,
    ) -> httpx.Response:
        """Send a request to `path` (under `/api/v2`); raise the `PaiError` of an error answer.
        `content` may be an iterable of bytes, streamed as it is read. A read, or a request
        marked `repeatable`, is tried again while the server cannot answer it (see above)."""

        def send() -> httpx.Response:
            request = self._http.build_request(
                method, path, params=params, json=json, content=content, headers=headers
            )
            with self._reaching():
                response = self._http.send(request)
            if response.is_error:
                raise error_from_response(response)
            return response

        if repeatable or method in SAFE_METHODS:
            return self._again_while_unavailable(send)
        return send()

    def _again_while_unavailable(self, attempt: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.retry_for
        pause = FIRST_PAUSE
        waiting = False
        while True:
            try:
                return attempt()
            except PaiError as error:
                if not _passing(error) or time.monotonic() >= deadline:
                    raise
                if not waiting and self.on_retry is not None:
                    self.on_retry(error, deadline - time.monotonic())
                waiting = True
                asked = getattr(error, "retry_after", None)
                wait = min(MAX_PAUSE, asked) if asked else pause
                time.sleep(min(wait, max(0.0, deadline - time.monotonic())))
                pause = min(MAX_PAUSE, pause * 2)

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

        def open_stream() -> httpx.Response:
            with self._reaching():
                response = self._http.send(request, stream=True)
            if response.is_error:
                response.read()
                response.close()
                raise error_from_response(response)
            return response

        response = self._again_while_unavailable(open_stream)
        try:
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
            kind = ServerNotTrustedError if _tls_refused(exc) else ServerUnavailableError
            raise kind(
                None, None, f"cannot reach the PAI server at {self.server}: {_reason(exc)}"
            ) from None


def _passing(error: PaiError) -> bool:
    """Whether the failure may pass by itself: no answer, or the server's store unavailable."""
    if isinstance(error, ServerNotTrustedError):
        return False
    return isinstance(error, ServerUnavailableError) or error.status in RETRIED_STATUSES


def _tls_refused(error: BaseException) -> bool:
    """Whether the connection failed in its TLS handshake (an untrusted certificate, a
    protocol the two ends do not share), as far down the chain of causes as it goes."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _reason(error: Exception) -> str:
    """`connection refused` from `[Errno 111] Connection refused`."""
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(error)).strip()
    return (text[:1].lower() + text[1:]) if text else type(error).__name__
