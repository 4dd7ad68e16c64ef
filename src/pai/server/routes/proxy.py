"""The authenticated reverse proxy to a task's web services:
`/jobs/{user}~{job}/proxy/{role}/{index}/{port}/...`, HTTP and WebSocket.

The portal reaches TensorBoard, JupyterLab or any port a task holds without the node's address
or an open port. Only the job's owner and administrators get through. Where a request goes is
decided from the store alone: the task's recorded address, and the port only if it is one the
task holds; the path is passed on whole (the service serves under the same prefix: Jupyter's
`base_url`, TensorBoard's `--path_prefix`) after dot segments and encoded separators, which
could make an upstream resolve it elsewhere, are refused. The platform's own credentials (its
session cookie, an `Authorization` header) are never passed on to the task, and a task cannot
set them.

A task's pages are served from the platform's own origin. For its owner that is no risk beyond
what the owner can do anyway; an administrator looking at someone else's task gets its pages
sandboxed (a unique origin), so a hostile page cannot act with the administrator's session.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import websockets
from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.responses import Response
from websockets.asyncio.client import ClientConnection

from pai.auth.permissions import Principal
from pai.errors import ForbiddenUserError, InvalidParametersError, NoJobError, UnauthorizedUserError
from pai.orchestrator.intents import find_job
from pai.server.context import ServerContext
from pai.server.cookies import LOGIN_COOKIE, SESSION_COOKIE
from pai.server.jobviews import job_attempt

router = APIRouter(include_in_schema=False)

PROXY_PATH = "/jobs/{framework_name}/proxy/{role}/{index}/{port}/{rest:path}"
PREFIX = re.compile(r"^/jobs/[^/]+/proxy/[^/]+/(\d+)/(\d+)(/.*)?$")
# Encoded '/', '\' and '.', and '\' itself: an upstream decoding them could see other segments.
FORBIDDEN_IN_RAW_PATH = re.compile(r"%2f|%5c|%2e|\\", re.IGNORECASE)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
NOT_FORWARDED = HOP_BY_HOP | {"authorization", "content-length"}
PLATFORM_COOKIES = {SESSION_COOKIE, LOGIN_COOKIE}
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
UPSTREAM_TIMEOUT = httpx.Timeout(30.0, read=None)


@dataclass(frozen=True)
class Upstream:
    """Where a proxied request goes: the task's address and one of its ports."""

    address: str
    port: int
    sandboxed: bool
    """The caller is not the job's owner (an administrator)."""


def check_raw_path(raw_path: str) -> None:
    """Refuse paths an upstream could resolve outside the task's prefix."""
    if FORBIDDEN_IN_RAW_PATH.search(raw_path):
        raise InvalidParametersError(
            "proxy path: encoded '/', '\\' or '.' and backslashes are not allowed"
        )
    segments = raw_path.split("/")
    if any(segment in (".", "..") for segment in segments) or "//" in raw_path:
        raise InvalidParametersError("proxy path: '.', '..' and empty segments are not allowed")
    if PREFIX.match(raw_path) is None:
        raise InvalidParametersError(
            "proxy path: expected /jobs/<user>~<job>/proxy/<role>/<index>/<port>/..."
        )


def resolve_upstream(
    context: ServerContext, caller: Principal, framework_name: str, role: str, index: int, port: int
) -> Upstream:
    """The task's address and `port`, if the caller may reach them and the task holds it."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        owner = row.username
        if not caller.may_act_for(owner):
            raise ForbiddenUserError(
                f"only {row.username} (the owner) or an administrator may reach the tasks of "
                f"job '{framework_name}'"
            )
        task = job_attempt(row).tasks.get((role, index))
    where = task.current.placement if task is not None else None
    if task is None or where is None or not task.alive:
        raise NoJobError(f"job '{framework_name}' has no running task {role} #{index}")
    held = {number for numbers in where["ports"].values() for number in numbers}
    if port not in held:
        raise NoJobError(
            f"task {role} #{index} of job '{framework_name}' holds no port {port}; "
            f"its ports: {', '.join(map(str, sorted(held)))}"
        )
    return Upstream(str(where["address"]), port, sandboxed=caller.username != owner)


async def _upstream_for(connection: HTTPConnection) -> Upstream:
    raw = connection.scope.get("raw_path") or connection.scope["path"].encode()
    raw_path = raw.decode("latin-1")
    check_raw_path(raw_path)
    match = PREFIX.match(raw_path)
    assert match is not None
    context: ServerContext = connection.app.state.context
    caller = await run_in_threadpool(_caller, context, connection)
    params = connection.path_params
    return await run_in_threadpool(
        resolve_upstream,
        context,
        caller,
        params["framework_name"],
        params["role"],
        int(match.group(1)),
        int(match.group(2)),
    )


def _caller(context: ServerContext, connection: HTTPConnection) -> Principal:
    """The caller from a bearer token or the portal's session cookie."""
    authorization = connection.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        token = connection.cookies.get(SESSION_COOKIE, "")
    if not token:
        raise UnauthorizedUserError("log in to reach a task's services")
    return context.authenticate(token)


def _forwarded_headers(connection: HTTPConnection) -> list[tuple[str, str]]:
    """The request's headers minus hop-by-hop ones and the platform's credentials."""
    headers = []
    for name, value in connection.headers.items():
        lowered = name.lower()
        # sec-*: the browser's handshake and fetch metadata, which belong to this hop only
        if lowered in NOT_FORWARDED or lowered.startswith("sec-"):
            continue
        if lowered == "cookie":
            value = _without_platform_cookies(value)
            if not value:
                continue
        headers.append((name, value))
    client = connection.client.host if connection.client else ""
    headers += [("x-forwarded-for", client), ("x-forwarded-proto", connection.url.scheme)]
    return headers


def _sets_platform_cookie(name: str, value: str) -> bool:
    return name.lower() == "set-cookie" and value.split("=", 1)[0].strip() in PLATFORM_COOKIES


def _without_platform_cookies(header: str) -> str:
    kept = [
        part.strip()
        for part in header.split(";")
        if part.strip() and part.strip().split("=", 1)[0] not in PLATFORM_COOKIES
    ]
    return "; ".join(kept)


def _target(upstream: Upstream, connection: HTTPConnection, scheme: str) -> httpx.URL:
    raw = (connection.scope.get("raw_path") or connection.scope["path"].encode()).decode("latin-1")
    query = connection.scope.get("query_string", b"").decode("latin-1")
    url = httpx.URL(scheme=scheme, host=upstream.address, port=upstream.port, path=raw)
    return url.copy_with(query=query.encode()) if query else url


@router.api_route(PROXY_PATH, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def proxy_http(request: Request) -> Response:
    """Pass the request to the task and stream its answer back."""
    upstream = await _upstream_for(request)
    outgoing = httpx.Request(
        request.method,
        _target(upstream, request, "http"),
        headers=_forwarded_headers(request),
        # Read whole: a streamed body goes chunked, even an empty one, which servers that do
        # not read request bodies (TensorBoard's) answer by resetting the connection.
        content=await request.body(),
        extensions={"timeout": UPSTREAM_TIMEOUT.as_dict()},
    )
    # A transport rather than a client: no redirect is followed, no proxy from the
    # environment is used, and no request line (which may carry a service's token) is logged.
    transport = httpx.AsyncHTTPTransport()
    try:
        answer = await transport.handle_async_request(outgoing)
    except httpx.HTTPError as exc:
        await transport.aclose()
        return Response(
            f"task service at port {upstream.port} did not answer: {type(exc).__name__}\n",
            status_code=502,
            media_type="text/plain",
        )

    async def close() -> None:
        await answer.aclose()
        await transport.aclose()

    headers = [
        (name, value)
        for name, value in answer.headers.multi_items()
        if name.lower() not in HOP_BY_HOP and not _sets_platform_cookie(name, value)
    ]
    if upstream.sandboxed:
        headers.append(("content-security-policy", SANDBOX))
    response = StreamingResponse(
        answer.aiter_raw(), status_code=answer.status_code, background=BackgroundTask(close)
    )
    response.raw_headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in headers
    ]
    return response


@router.websocket(PROXY_PATH)
async def proxy_websocket(websocket: WebSocket) -> None:
    """Join the browser's WebSocket to one opened to the task (Jupyter's kernels use them)."""
    try:
        _check_origin(websocket)
        upstream = await _upstream_for(websocket)
    except (InvalidParametersError, UnauthorizedUserError, ForbiddenUserError, NoJobError) as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    protocols = [
        protocol.strip()
        for protocol in websocket.headers.get("sec-websocket-protocol", "").split(",")
        if protocol.strip()
    ]
    headers = [
        (name, value)
        for name, value in _forwarded_headers(websocket)
        if name.lower() not in ("host", "origin")
    ]
    try:
        remote = await websockets.connect(
            str(_target(upstream, websocket, "ws")),
            subprotocols=protocols or None,  # type: ignore[arg-type]
            additional_headers=headers,
            max_size=None,
            proxy=None,
        )
    except (OSError, websockets.exceptions.WebSocketException):
        await websocket.close(code=1011, reason="the task's service refused the connection")
        return
    await websocket.accept(subprotocol=remote.subprotocol)
    async with remote:
        await _pump(websocket, remote)


def _check_origin(websocket: WebSocket) -> None:
    """A page of another site must not open a socket with the visitor's cookie."""
    origin = websocket.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != websocket.headers.get("host"):
        raise ForbiddenUserError(f"WebSocket from origin {origin} is not allowed")


async def _pump(browser: WebSocket, remote: ClientConnection) -> None:
    async def to_remote() -> None:
        while True:
            message = await browser.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes")
            await remote.send(data if data is not None else message.get("text") or "")

    async def to_browser() -> None:
        async for data in remote:
            if isinstance(data, bytes):
                await browser.send_bytes(data)
            else:
                await browser.send_text(data)

    tasks = [asyncio.create_task(to_remote()), asyncio.create_task(to_browser())]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    for task in done:
        task.exception()  # read: a connection that ended is how a session ends, not an error
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):  # the browser went first
        await browser.close()
