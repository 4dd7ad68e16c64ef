"""Per-request logging, request ids, the last line of defence for unexpected errors, the
refusal of NUL in URLs (`pai.server.nul`), and the API paths OpenPAI's clients write."""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import time
from collections import Counter
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pai.errors import InvalidParametersError, UnknownError
from pai.server.errors import error_response
from pai.server.logconfig import redact
from pai.server.nul import NUL_REFUSED, nul_in_url
from pai.store.failures import store_failure

logger = logging.getLogger("pai.server.requests")


class _RequestIds:
    """Request ids unique across processes: a random prefix per process and a counter (a
    random id per request cost a system call for the random bytes of every request)."""

    def __init__(self) -> None:
        self._renew()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self) -> None:
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):08x}"


_request_ids = _RequestIds()


class RequestLogMiddleware:
    """Logs one structured line per request (never headers or bodies), tags the response with
    `X-Request-ID`, and turns an unexpected exception into a 500 `UnknownError` body that points
    at the log line instead of showing a stack trace; a store that cannot be written or reached
    is no unexpected exception: 507 or 503, with `Retry-After` (`pai.store.failures`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_ids.next()
        status: int | None = None
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", request_id.encode()),
                ]
            await send(message)

        path = redact(scope.get("path", ""))
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as error:
            failure = store_failure(error)
            if failure is not None:
                logger.warning(
                    "%s %s: %s (%s)",
                    scope["method"],
                    path,
                    failure.message,
                    error,
                    extra={"request_id": request_id},
                )
            else:
                logger.exception(
                    "unhandled error in %s %s",
                    scope["method"],
                    path,
                    extra={"request_id": request_id},
                )
            if status is not None:
                raise  # the response is under way; the connection is all that is left to drop
            response = error_response(
                failure
                or UnknownError(
                    f"internal server error; the server log has details (request {request_id})"
                )
            )
            await response(scope, receive, send_with_id)
        finally:
            client = scope.get("client")
            logger.info(
                "%s %s %s",
                scope["method"],
                path,
                status,
                extra={
                    "request_id": request_id,
                    "method": scope["method"],
                    "path": path,
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                    "client": client[0] if client else None,
                },
            )


class RejectNulMiddleware:
    """Answers 400 InvalidParametersError to a request whose path or query holds NUL."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        where = nul_in_url(scope) if scope["type"] == "http" else None
        if where is None:
            await self.app(scope, receive, send)
            return
        refusal = error_response(InvalidParametersError(f"{where}: {NUL_REFUSED}"))
        await refusal(scope, receive, send)


class SingleValuedQueryMiddleware:
    """Every query parameter of the API takes one value (a list is comma-separated), so one
    given twice is refused (400 InvalidParametersError), as OpenPAI's server does, rather than
    silently read as its last."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(API_PREFIX):
            repeated = _repeated_parameter(scope["query_string"])
            if repeated is not None:
                await error_response(InvalidParametersError(repeated))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _repeated_parameter(query_string: bytes) -> str | None:
    """Why the query is refused if it gives a parameter more than once, else None."""
    if not query_string:
        return None
    query = query_string.decode("latin-1")
    counts = Counter(name for name, _ in parse_qsl(query, keep_blank_values=True))
    for name, count in counts.items():
        if count > 1:
            return f"query.{name}: given {count} times; give it once (a list is comma-separated)"
    return None


API_PREFIX = "/api/v2"
OPENPAI_PREFIX = "/rest-server"
"""Where OpenPAI's proxy serves the API (`https://<master>/rest-server/api/v2`): its SDK and CLI
build every URL from the cluster's address that way."""


class OpenPaiPathMiddleware:
    """Serves the API also at the paths OpenPAI's clients use: under `/rest-server`, and with a
    trailing slash (`/api/v2/users/`), which OpenPAI's server ignores and its SDK sends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = _api_path(scope["path"])
            if path != scope["path"]:
                raw = scope.get("raw_path")
                scope = {
                    **scope,
                    "path": path,
                    "raw_path": _api_path(raw.decode("latin-1")).encode("latin-1")
                    if raw
                    else path.encode(),
                }
        await self.app(scope, receive, send)


def _api_path(path: str) -> str:
    if path.startswith(OPENPAI_PREFIX + "/api/"):
        path = path[len(OPENPAI_PREFIX) :]
    if path.startswith("/api/") and path.endswith("/"):
        path = path.rstrip("/")
    return path


RequestObserver = Callable[[str, str, int, float], None]
"""Told of every answered request: method, route template, status and seconds taken."""


class RequestTimingMiddleware:
    """Times every request by the route it matched (`/api/v2/jobs/{framework_name}`, not the
    path itself, so metrics stay few) and tells an observer."""

    def __init__(self, app: ASGIApp, observe: RequestObserver) -> None:
        self.app = app
        self._observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            self._observe(scope["method"], _route_of(scope), status, time.perf_counter() - started)


def _route_of(scope: Scope) -> str:
    """The template of the matched route with its full path: routers included with a prefix
    keep their routes' paths without it."""
    template: str | None = getattr(scope.get("route"), "path", None)
    if template is None:
        return "unmatched"
    path = scope["path"]
    if path.startswith(API_PREFIX + "/") and not template.startswith(API_PREFIX):
        return API_PREFIX + template
    return template
