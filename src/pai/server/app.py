"""The application factory: the OpenPAI REST API v2 under `/api/v2`, plus health probes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

import pai
from pai.auth.bootstrap import BootstrapResult, initialize
from pai.server.context import ServerContext
from pai.server.deps import CREDENTIAL_SCHEMES, authenticate
from pai.server.errors import install_error_handlers
from pai.server.logconfig import protect_library_loggers
from pai.server.middleware import (
    API_PREFIX,
    OpenPaiPathMiddleware,
    RejectNulMiddleware,
    RequestLogMiddleware,
    SingleValuedQueryMiddleware,
)
from pai.server.routes import authn, groups, health, info, tokens, users
from pai.settings import Settings
from pai.store import Database
from pai.store.failures import when_store_reachable

IDENTITY_ROUTERS = (info.router, authn.router, tokens.router, users.router, groups.router)


class InnerMiddleware(Protocol):
    """An ASGI middleware made of the app it wraps."""

    def __init__(self, app: ASGIApp) -> None: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


Lifespan = Callable[[ServerContext], AbstractAsyncContextManager[None]]
"""Something that runs while the server runs (the controller loop): entered after the database
is ready, exited before it is closed, in reverse order."""


def create_app(
    settings: Settings,
    *,
    database: Database | None = None,
    routers: Sequence[APIRouter] = (),
    root_routers: Sequence[APIRouter] = (),
    services: Mapping[type, object] | None = None,
    lifespans: Sequence[Lifespan] = (),
    launcher_type: str = "local",
    inner_middleware: Sequence[type[InnerMiddleware]] = (),
) -> FastAPI:
    """Build the API server.

    On start it migrates the database and creates the built-in groups and the `admin` user;
    a generated admin password is printed once to stdout. `routers` are mounted under
    `/api/v2` next to the identity API, `root_routers` at the root (the portal), `services`
    become `context.service(kind)`, and `lifespans` start and stop with the server. The
    database is closed on shutdown unless it was passed in (then its owner closes it).
    `inner_middleware` (ASGI middleware classes) runs inside the platform's own, next to the
    routes, the first innermost: what they answer is logged and passed the same URL rules.
    """
    owns_database = database is None
    database = database or Database(settings.database_url)
    context = ServerContext.create(
        settings, database, launcher_type=launcher_type, services=services or {}
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        result = await run_in_threadpool(
            when_store_reachable,
            lambda: initialize(database, settings),
            lambda waiting: print(waiting, file=sys.stderr, flush=True),
            settings.store_wait_seconds,
        )
        announce_admin_password(result)
        try:
            async with AsyncExitStack() as stack:
                for attached in lifespans:
                    await stack.enter_async_context(attached(context))
                yield
        finally:
            if owns_database:
                database.dispose()

    app = FastAPI(
        title="PAI REST API",
        version=pai.__version__,
        description=(
            "OpenPAI-compatible REST API v2. Errors are `{code, message}` bodies. No text may "
            "contain the NUL character (U+0000): a request with one anywhere is refused (400)."
        ),
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.context = context
    install_error_handlers(app)
    for middleware in inner_middleware:
        app.add_middleware(middleware)
    app.add_middleware(SingleValuedQueryMiddleware)
    app.add_middleware(OpenPaiPathMiddleware)
    app.add_middleware(RejectNulMiddleware)
    app.add_middleware(RequestLogMiddleware)
    protect_library_loggers()
    # The jobs API (first of `routers`) is matched first: it takes the most requests.
    for router in (*routers, *IDENTITY_ROUTERS):
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(health.router)
    for router in root_routers:
        app.include_router(router)
    _document_errors_as_openpai_does(app)
    return app


def announce_admin_password(result: BootstrapResult) -> None:
    """Show a generated admin password once, on stdout only (never through logging)."""
    if result.generated_admin_password is None:
        return
    sys.stdout.write(
        "PAI created the administrator account 'admin' with the password "
        f"{result.generated_admin_password}\n"
        "It is shown only this once: log in and change it (PUT /api/v2/users/me).\n"
    )
    sys.stdout.flush()


def _document_errors_as_openpai_does(app: FastAPI) -> None:
    """FastAPI documents a 422 validation error on every endpoint, but this API answers
    validation errors with 400 `InvalidParametersError`; fix the generated document."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    responses = operation.get("responses", {})
                    responses.pop("422", None)
                    if operation.get("parameters") or operation.get("requestBody"):
                        responses.setdefault(
                            "400",
                            {
                                "description": "Invalid parameters (InvalidParametersError)",
                                "content": {
                                    "application/json": {
                                        "schema": {"$ref": "#/components/schemas/ErrorBody"}
                                    }
                                },
                            },
                        )
            schemas = schema.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            _document_credentials(app, schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _document_credentials(app: FastAPI, schema: dict[str, Any]) -> None:
    """Mark the operations that take credentials (those that depend on `authenticate`, which
    reads the header itself) with the schemes they accept."""
    schema.setdefault("components", {})["securitySchemes"] = CREDENTIAL_SCHEMES
    for mounted in iter_route_contexts(app.routes):  # routes of included routers too
        route = mounted.original_route
        if not isinstance(route, APIRoute) or not _needs_credentials(route.dependant):
            continue
        operations = schema["paths"].get(mounted.path_format, {})
        for method in route.methods or ():
            if method.lower() in operations:
                operations[method.lower()]["security"] = [{name: []} for name in CREDENTIAL_SCHEMES]


def _needs_credentials(dependant: Dependant) -> bool:
    return any(
        needed.call is authenticate or _needs_credentials(needed)
        for needed in dependant.dependencies
    )
