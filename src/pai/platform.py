"""The composition root: one process serving the API and the portal and running the controller
with the local executor, as `pai up` starts it (and the tests start it on a free port)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool

from pai.auth.sealing import SecretBox
from pai.auth.secret import load_secret_key
from pai.cluster.model import ClusterConfig
from pai.executors.local import LocalExecutor
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.runtime.exitspec import ExitSpecSource
from pai.scheduler.scheduler import Scheduler
from pai.server import create_app
from pai.server.context import ServerContext
from pai.settings import Settings
from pai.store import Database

EXIT_SPEC_FILE = "exit-spec.yaml"
"""An administrator's additions to the exit spec, in `$PAI_HOME`; reloaded when it changes."""


def build_controller(settings: Settings, cluster: ClusterConfig, database: Database) -> Controller:
    exit_specs = ExitSpecSource(settings.home / EXIT_SPEC_FILE)
    return Controller(
        database,
        Scheduler(cluster),
        LocalExecutor(settings.home / "executor", exit_specs=exit_specs),
        SecretBox(load_secret_key(settings)),
        ControllerSettings(home=settings.home),
        exit_specs=exit_specs,
    )


def create_platform_app(
    settings: Settings, cluster: ClusterConfig, *, routers: Sequence[APIRouter] = ()
) -> FastAPI:
    """The whole platform as one ASGI app; the controller runs while the app runs."""
    from pai.server.routes import clusters, jobs
    from pai.web.routes import router as portal

    database = Database(settings.database_url)
    controller = build_controller(settings, cluster, database)

    @asynccontextmanager
    async def run_controller(_context: ServerContext) -> AsyncIterator[None]:
        await run_in_threadpool(controller.start)
        try:
            yield
        finally:
            await run_in_threadpool(controller.stop)
            database.dispose()

    return create_app(
        settings,
        database=database,
        routers=[jobs.router, clusters.router, *routers],
        root_routers=[portal],
        services={Controller: controller},
        lifespans=[run_controller],
    )
