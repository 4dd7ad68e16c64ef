"""The composition root: one process serving the API and the portal and running the controller
with the engine that runs tasks (processes on this machine, or a Ray cluster), as `pai up`
starts it (and the tests start it on a free port)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool

from pai.auth.sealing import SecretBox
from pai.auth.secret import load_secret_key
from pai.cluster.model import ClusterConfig
from pai.errors import ConfigurationError
from pai.executors.base import Executor
from pai.executors.local import LocalExecutor
from pai.marketplace.builtin import ensure_builtin_items
from pai.monitoring.actions import load_actions
from pai.monitoring.alerts import AlertDesk
from pai.monitoring.history import Retention, UsageHistory
from pai.monitoring.metrics import PlatformMetrics
from pai.monitoring.monitor import Monitor
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.runtime.exitspec import ExitSpecSource
from pai.runtime.ports import PortAllocator
from pai.scheduler.scheduler import Scheduler
from pai.server import create_app
from pai.server.context import ServerContext
from pai.server.middleware import RequestTimingMiddleware
from pai.settings import Settings
from pai.store import Database

EXIT_SPEC_FILE = "exit-spec.yaml"
"""An administrator's additions to the exit spec, in `$PAI_HOME`; reloaded when it changes."""


@dataclass(frozen=True)
class Engine:
    """Where tasks run: the executor, how task ports are found free, and how to let go."""

    executor: Executor
    ports: PortAllocator
    close: Callable[[], None]


def open_engine(settings: Settings, cluster: ClusterConfig, exit_specs: ExitSpecSource) -> Engine:
    if settings.engine == "ray":
        return _ray_engine(settings, cluster, exit_specs)
    local = LocalExecutor(settings.home / "executor", exit_specs=exit_specs)
    return Engine(local, PortAllocator(), close=lambda: None)


def _ray_engine(settings: Settings, cluster: ClusterConfig, exit_specs: ExitSpecSource) -> Engine:
    try:
        import ray

        from pai.executors.ray.executor import RayExecutor, connect
    except ImportError:
        raise ConfigurationError(
            "PAI_ENGINE=ray needs Ray on this machine: pip install 'pai[ray]'"
        ) from None
    assert settings.ray_address is not None  # Settings checks it
    if not ray.is_initialized():
        connect(settings.ray_address, settings.ray_namespace)
    executor = RayExecutor(
        cluster,
        settings.home / "executor" / "ray",
        node_dir=settings.ray_node_dir,
        exit_specs=exit_specs,
        usage_interval=settings.monitor_interval,
    )
    # Ports are on other machines: the task's supervisor checks them when the task starts.
    return Engine(executor, PortAllocator(probe=None), close=executor.close)


def build_controller(
    settings: Settings, cluster: ClusterConfig, database: Database
) -> tuple[Controller, Engine]:
    exit_specs = ExitSpecSource(settings.home / EXIT_SPEC_FILE)
    engine = open_engine(settings, cluster, exit_specs)
    controller = Controller(
        database,
        Scheduler(cluster),
        engine.executor,
        SecretBox(load_secret_key(settings)),
        ControllerSettings(),
        exit_specs=exit_specs,
        ports=engine.ports,
    )
    return controller, engine


@asynccontextmanager
async def seed_marketplace(context: ServerContext) -> AsyncIterator[None]:
    """The examples shipped with PAI are marketplace items from the first start on."""

    def seed() -> None:
        with context.database.session() as session:
            ensure_builtin_items(session)

    await run_in_threadpool(seed)
    yield


@dataclass(frozen=True)
class Monitoring:
    """What watches the platform: usage sampling and history, metrics, alerts and actions."""

    monitor: Monitor
    history: UsageHistory
    metrics: PlatformMetrics
    alerts: AlertDesk

    @classmethod
    def build(cls, settings: Settings, database: Database, controller: Controller) -> Monitoring:
        actions = load_actions(settings.alert_actions_path)  # a bad file stops the start
        history = UsageHistory(
            database, Retention(keep=timedelta(days=settings.monitor_retention_days))
        )
        monitor = Monitor(
            controller.executor,
            database,
            controller.cluster,
            controller.snapshot,
            history,
            interval=settings.monitor_interval,
        )
        metrics = PlatformMetrics(monitor, controller, database, settings.home)
        controller.observer = metrics
        alerts = AlertDesk(database, actions, controller.wake, portal_url=settings.public_url)
        return cls(monitor, history, metrics, alerts)

    def services(self) -> dict[type, object]:
        return {
            Monitor: self.monitor,
            UsageHistory: self.history,
            PlatformMetrics: self.metrics,
            AlertDesk: self.alerts,
        }

    def start(self) -> None:
        self.monitor.start()
        self.alerts.start()

    def stop(self) -> None:
        self.alerts.stop()
        self.monitor.stop()


def create_platform_app(
    settings: Settings, cluster: ClusterConfig, *, routers: Sequence[APIRouter] = ()
) -> FastAPI:
    """The whole platform as one ASGI app; the controller runs while the app runs."""
    from pai.server.routes import (
        audit,
        clusters,
        interactive,
        jobs,
        marketplace,
        monitoring,
        ssh,
        storages,
    )
    from pai.server.routes.proxy import router as task_proxy
    from pai.web.routes import router as portal

    database = Database(settings.database_url)
    controller, engine = build_controller(settings, cluster, database)
    watch = Monitoring.build(settings, database, controller)

    @asynccontextmanager
    async def run_controller(_context: ServerContext) -> AsyncIterator[None]:
        await run_in_threadpool(controller.start)
        await run_in_threadpool(watch.start)
        try:
            yield
        finally:
            await run_in_threadpool(watch.stop)
            await run_in_threadpool(controller.stop)
            await run_in_threadpool(engine.close)
            database.dispose()

    app = create_app(
        settings,
        database=database,
        routers=[
            jobs.router,
            clusters.router,
            monitoring.router,
            storages.router,
            marketplace.router,
            audit.router,
            ssh.router,
            interactive.router,
            *routers,
        ],
        root_routers=[monitoring.metrics_router, task_proxy, portal],
        services={Controller: controller, **watch.services()},
        lifespans=[seed_marketplace, run_controller],
        launcher_type=settings.engine,
    )
    app.add_middleware(RequestTimingMiddleware, observe=watch.metrics.request_answered)
    return app
