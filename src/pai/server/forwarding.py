"""An API worker passes what only the controller's process can answer on to it.

Task logs are read where the engine keeps them, and Alertmanager's webhook acts through the
controller: an API worker (`pai serve api`) forwards these requests, as they came (the caller's
credentials included, which the controller checks again), to the address the controller
published with its lease, and streams the answer back. Nothing else is forwarded, and only to
that one address.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import anyio
import httpx
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from pai.errors import PaiError, ServiceUnavailableError
from pai.server.errors import error_response

FORWARDED_PATHS = (
    re.compile(
        r"^/api/v2/jobs/[^/]+/attempts/[^/]+/taskRoles/[^/]+/taskIndex/[^/]+"
        r"/attempts/[^/]+/logs/[^/]+$"
    ),
    re.compile(r"^/api/v2/alerts/webhook$"),
)
NOT_FORWARDED_HEADERS = frozenset(
    {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"trailer"}
)


class ControllerForwarding:
    """ASGI middleware; `controller()` gives the controller's base URL (it may change when a
    standby takes over, so it is asked for each request)."""

    def __init__(self, app: ASGIApp, controller: Callable[[], str]) -> None:
        self.app = app
        self._controller = controller
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(p.match(scope["path"]) for p in FORWARDED_PATHS):
            await self.app(scope, receive, send)
            return
        try:
            base = await run_in_threadpool(self._controller)
            await self._forward(base, scope, receive, send)
        except PaiError as error:
            await error_response(error)(scope, receive, send)
        except httpx.TransportError:
            unreachable = ServiceUnavailableError(
                "the PAI controller does not answer; try again once it is back"
            )
            await error_response(unreachable)(scope, receive, send)

    async def _forward(self, base: str, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        target = base.rstrip("/") + scope["raw_path"].decode()
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode()
        request = self._client.build_request(
            scope["method"],
            target,
            headers=[(k, v) for k, v in scope["headers"] if k not in NOT_FORWARDED_HEADERS],
            content=bytes(body),
        )
        response = await self._client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v)
                        for k, v in response.headers.raw
                        if k.lower() not in NOT_FORWARDED_HEADERS | {b"content-length"}
                    ],
                }
            )
            async with anyio.create_task_group() as streams:
                # A followed log never ends by itself: stop when the caller goes away.
                streams.start_soon(_cancel_on_disconnect, receive, streams.cancel_scope)
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                streams.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
