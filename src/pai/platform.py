"""The composition root: the platform in one process (the API and the portal, the controller
and the engine that runs tasks: processes on this machine, a Ray cluster, or hollow nodes), as
`pai up` and `pai serve controller` start it (and the tests start it on a free port); and an
API worker without a controller, as `pai serve api` starts it."""

from __future__ import annotations

import logging
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
from pai.executors.hollow.executor import HollowExecutor
from pai.executors.local import LocalExecutor
from pai.executors.node.taskfiles import SupervisorConfig
from pai.marketplace.builtin import ensure_builtin_items
from pai.monitoring.actions import load_actions
from pai.monitoring.alerts import AlertDesk
from pai.monitoring.history import Retention, UsageHistory
from pai.monitoring.metrics import PlatformMetrics
from pai.monitoring.monitor import Monitor
from pai.orchestrator.controller import Controller, ControllerSettings
from pai.orchestrator.controlplane import ControlPlane
from pai.orchestrator.leadership import Leadership, LeaseTerms
from pai.orchestrator.published import StoredControlPlane
from pai.orchestrator.term import ControllerTerm
from pai.orchestrator.wakeups import WakeupListener
from pai.runtime.exitspec import ExitSpecSource
from pai.runtime.ports import PortAllocator
from pai.scheduler.pai import build_scheduler
from pai.server import InnerMiddleware, Lifespan, create_app, settle_heap
from pai.server.context import ServerContext
from pai.server.forwarding import ControllerForwarding
from pai.server.logconfig import configure_logging
from pai.server.middleware import RequestTimingMiddleware
from pai.settings import Settings
from pai.store import Database
from pai.store.failures import when_store_reachable
from pai.store.installation import store_id

log = logging.getLogger(__name__)

EXIT_SPEC_FILE = "exit-spec.yaml"
"""An administrator's additions to the exit spec, in `$PAI_HOME`; reloaded when it changes."""


@dataclass(frozen=True)
class Engine:
    """Where tasks run: the executor, how task ports are found free, and how to let go."""

    executor: Executor
    ports: PortAllocator
    close: Callable[[], None]


def open_engine(
    settings: Settings, cluster: ClusterConfig, exit_specs: ExitSpecSource, database: Database
) -> Engine:
    if settings.engine in ("ray", "hollow"):
        # Read as the controller starts, when a store restart may just be under way.
        store = when_store_reachable(
            lambda: store_id(database),
            log.warning,
            settings.store_wait_seconds,
        )
        if settings.engine == "ray":
            return _ray_engine(settings, cluster, exit_specs, store)
        return _hollow_engine(settings, cluster, exit_specs, store)
    local = LocalExecutor(
        settings.home / "executor",
        config=supervisor_config(settings, cluster),
        exit_specs=exit_specs,
        nodes=[node.name for node in cluster.nodes],
    )
    return Engine(local, PortAllocator(), close=lambda: None)


def supervisor_config(settings: Settings, cluster: ClusterConfig) -> SupervisorConfig:
    """How tasks are supervised: on every node with the installation's isolation and disk
    floor, and a stopped task's grace period defaults to the cluster file's."""
    return SupervisorConfig(
        stop_grace_seconds=cluster.stop_grace_seconds,
        isolation=settings.isolation_policy,
        disk_floor=settings.disk_floor,
    )


def _ray_engine(
    settings: Settings, cluster: ClusterConfig, exit_specs: ExitSpecSource, store: str
) -> Engine:
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
        store_id=store,
        config=supervisor_config(settings, cluster),
        exit_specs=exit_specs,
        usage_interval=settings.monitor_interval,
        node_timeout=settings.ray_node_timeout,
    )
    # Ports are on other machines: the task's supervisor checks them when the task starts.
    return Engine(executor, PortAllocator(probe=None), close=executor.close)


def _hollow_engine(
    settings: Settings, cluster: ClusterConfig, exit_specs: ExitSpecSource, store: str
) -> Engine:
    executor = HollowExecutor(
        cluster,
        settings.home / "executor" / "hollow",
        store_id=store,
        config=supervisor_config(settings, cluster),
        exit_specs=exit_specs,
        node_timeout=settings.ray_node_timeout,
        loss=settings.hollow_loss,
        loss_every=settings.hollow_loss_every,
    )
    # No port is probed: the nodes are not this machine.
    return Engine(executor, PortAllocator(probe=None), close=executor.close)


def build_controller(
    settings: Settings, cluster: ClusterConfig, database: Database
) -> tuple[Controller, Engine]:
    exit_specs = ExitSpecSource(settings.home / EXIT_SPEC_FILE)
    engine = open_engine(settings, cluster, exit_specs, database)
    controller = Controller(
        database,
        build_scheduler(
            settings.scheduler, cluster, reserve_after_s=settings.scheduler_reserve_after
        ),
        engine.executor,
        SecretBox(load_secret_key(settings)),
        ControllerSettings(fair_share_half_life=settings.fair_share_half_life),
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


@dataclass(frozen=True)
class ControllerRole:
    """How the controller of this process meets the others: the address API workers reach
    it at (logs, wake-ups), whether it listens for their wake-ups there, and what to do when
    it loses the lease (the process should exit; its supervisor starts it as a standby)."""

    address: str = ""
    wakeups: tuple[str, int] | None = None
    """Where it listens for API workers' wake-ups (UDP), if any run apart."""
    on_lease_lost: Callable[[], None] = lambda: None
    leadership: Leadership | None = None
    """The lease this process waited for before it started (else one is made)."""


def create_platform_app(
    settings: Settings,
    cluster: ClusterConfig,
    *,
    routers: Sequence[APIRouter] = (),
    role: ControllerRole | None = None,
) -> FastAPI:
    """The whole platform as one ASGI app: the API and portal, and the controller, which acts
    while the app runs and this process holds the controller lease."""
    role = role or ControllerRole()
    database = Database(settings.database_url)
    controller, engine = build_controller(settings, cluster, database)
    watch = Monitoring.build(settings, database, controller)
    leadership = role.leadership or Leadership(
        database, role.address, terms=LeaseTerms.lasting(settings.controller_lease_seconds)
    )
    term = ControllerTerm(
        leadership,
        controller,
        companions=[(watch.start, watch.stop)],
        on_lost=role.on_lease_lost,
    )

    @asynccontextmanager
    async def run_controller(_context: ServerContext) -> AsyncIterator[None]:
        listener = None
        if role.wakeups is not None:
            listener = WakeupListener(*role.wakeups, controller.wake)
            listener.start()
        await run_in_threadpool(term.begin)
        try:
            yield
        finally:
            if listener is not None:
                listener.stop()
            await run_in_threadpool(term.end)
            await run_in_threadpool(engine.close)
            database.dispose()

    api_routers, root_routers = _routers()
    app = create_app(
        settings,
        database=database,
        routers=[*api_routers, *routers],
        root_routers=root_routers,
        services={ControlPlane: controller, Executor: controller.executor, **watch.services()},
        lifespans=[seed_marketplace, run_controller],
        launcher_type=settings.engine,
        inner_middleware=_shortcuts(),
    )
    app.add_middleware(RequestTimingMiddleware, observe=watch.metrics.request_answered)
    return app


def create_api_app(settings: Settings, *, lifespans: Sequence[Lifespan] = ()) -> FastAPI:
    """An API and portal worker without a controller: it serves from the store, shows the
    state the controller publishes there, and passes what only the controller's process can
    answer (task logs, metrics, Alertmanager's webhook) on to it. Run any number of them
    beside one `pai serve controller` against the same database (and `PAI_SECRET_KEY`)."""
    from pai.server.routes import monitoring

    database = Database(settings.database_url)
    plane = StoredControlPlane(
        database,
        SecretBox(load_secret_key(settings)),
        ExitSpecSource(settings.home / EXIT_SPEC_FILE),
    )
    history = UsageHistory(
        database, Retention(keep=timedelta(days=settings.monitor_retention_days))
    )

    @asynccontextmanager
    async def follow_the_controller(_context: ServerContext) -> AsyncIterator[None]:
        await run_in_threadpool(plane.start)
        try:
            yield
        finally:
            await run_in_threadpool(plane.stop)

    api_routers, root_routers = _routers()
    app = create_app(
        settings,
        database=database,
        routers=api_routers,
        root_routers=[
            monitoring.relayed_metrics_router if router is monitoring.metrics_router else router
            for router in root_routers
        ],
        services={ControlPlane: plane, StoredControlPlane: plane, UsageHistory: history},
        lifespans=[follow_the_controller, *lifespans],
        launcher_type=settings.engine,
        inner_middleware=_shortcuts(),
    )
    app.add_middleware(ControllerForwarding, controller=lambda: plane.address)
    return app


def api_app_from_environment() -> FastAPI:
    """`create_api_app` with the settings of the environment: what each worker process of
    `pai serve api --workers N` builds; each logs to `$PAI_HOME/api.log`."""
    settings = Settings.from_env()

    @asynccontextmanager
    async def log_to_file(_context: ServerContext) -> AsyncIterator[None]:
        with open(settings.home / "api.log", "a", encoding="utf-8") as log_file:
            handler = configure_logging(settings.log_level, log_file)
            try:
                yield
            finally:
                logging.getLogger().removeHandler(handler)

    app = create_api_app(settings, lifespans=[log_to_file])
    settle_heap()
    return app


def _routers() -> tuple[list[APIRouter], list[APIRouter]]:
    """The API's routers (under `/api/v2`) and those at the root: metrics and the portal."""
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

    return (
        [
            jobs.router,
            clusters.router,
            monitoring.router,
            storages.router,
            marketplace.router,
            audit.router,
            ssh.router,
            interactive.router,
        ],
        [monitoring.metrics_router, task_proxy, portal],
    )


def _shortcuts() -> list[type[InnerMiddleware]]:
    """Middleware that answers the busiest requests past FastAPI's routing (submissions)."""
    from pai.server.routes.jobs import SubmissionShortcut

    return [SubmissionShortcut]
