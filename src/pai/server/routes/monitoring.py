"""Monitoring over HTTP: `/metrics` for Prometheus, Alertmanager's webhook, the alerts, usage
history of jobs, VCs and the cluster, the monitoring token and cordoning nodes.

`/metrics` and the webhook take the monitoring token (`Authorization: Bearer`, see
`pai monitoring config`); `/metrics` is also open to clients on this machine's loopback, so a
Prometheus beside PAI needs no token; an API worker relays the controller's. Everything else
takes a user's token as the rest of the API does.
"""

from __future__ import annotations

import hmac
import ipaddress
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import httpx
from fastapi import APIRouter, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from sqlalchemy import select

from pai.errors import InvalidParametersError, ServiceUnavailableError, UnauthorizedUserError
from pai.monitoring.access import monitoring_token
from pai.monitoring.alerts import AlertDesk, AlertmanagerMessage, alert_view
from pai.monitoring.history import CLUSTER, TASK, VC, Series, UsageHistory
from pai.monitoring.metrics import PlatformMetrics
from pai.orchestrator.controlplane import ControlPlane
from pai.orchestrator.intents import cordon, find_job, uncordon
from pai.orchestrator.published import StoredControlPlane
from pai.server.deps import Admin, Caller, Context
from pai.server.errors import error_responses
from pai.store.models import Alert

router = APIRouter(tags=["monitoring"])
metrics_router = APIRouter(tags=["monitoring"])
relayed_metrics_router = APIRouter(tags=["monitoring"])
"""An API worker's `/metrics`, in place of `metrics_router`'s."""
RELAY_TIMEOUT_SECONDS = 10.0

MAX_ALERTS = 500


def _check_monitoring_token(request: Request, context: Context, *, loopback_ok: bool) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    expected = monitoring_token(context.settings)
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), expected):
        return
    client = request.client.host if request.client else ""
    if loopback_ok and client and ipaddress.ip_address(client).is_loopback:
        return
    raise UnauthorizedUserError(
        "this endpoint takes the monitoring token (Authorization: Bearer ...; "
        "`pai monitoring config` writes it for Prometheus and Alertmanager)"
    )


@metrics_router.get("/metrics", response_class=Response, responses=error_responses(401))
def metrics(request: Request, context: Context) -> Response:
    """Prometheus text format: tasks' and nodes' use, jobs, VCs, and PAI's own latencies."""
    _check_monitoring_token(request, context, loopback_ok=True)
    return Response(context.service(PlatformMetrics).render(), media_type=CONTENT_TYPE_LATEST)


@relayed_metrics_router.get(
    "/metrics", response_class=Response, responses=error_responses(401, 503)
)
async def relayed_metrics(request: Request, context: Context) -> Response:
    """The controller's `/metrics`, from an API worker (which has none of its own): Prometheus
    scrapes `pai up` at the one address it serves, with API workers or without. The caller is
    checked here, where its address is known (the controller would see this worker's loopback
    address), and the controller is asked with the monitoring token."""
    _check_monitoring_token(request, context, loopback_ok=True)
    controller = context.service(StoredControlPlane).address.rstrip("/")
    asking = {"Authorization": f"Bearer {monitoring_token(context.settings)}"}
    try:
        async with httpx.AsyncClient(timeout=RELAY_TIMEOUT_SECONDS) as client:
            answer = await client.get(f"{controller}/metrics", headers=asking)
    except httpx.TransportError:
        raise ServiceUnavailableError(
            "the PAI controller does not answer; try again once it is back"
        ) from None
    kind = answer.headers.get("content-type", CONTENT_TYPE_LATEST)
    return Response(answer.content, status_code=answer.status_code, media_type=kind)


class Received(BaseModel):
    received: int


@router.post("/alerts/webhook", response_model=Received, responses=error_responses(400, 401))
def alertmanager_webhook(
    message: AlertmanagerMessage, request: Request, context: Context
) -> Received:
    """Alertmanager's webhook (message version 4): every alert is recorded, then acted on."""
    _check_monitoring_token(request, context, loopback_ok=False)
    context.service(AlertDesk).receive(message)
    return Received(received=len(message.alerts))


@router.get("/alerts", responses=error_responses(401))
def list_alerts(
    context: Context,
    caller: Caller,
    state: Annotated[Literal["firing", "resolved", "all"], Query()] = "firing",
) -> list[dict[str, Any]]:
    """Alerts, newest first, with the actions they caused. Administrators see every alert,
    other users those about their own jobs."""
    query = select(Alert).order_by(Alert.starts_at.desc(), Alert.id.desc()).limit(MAX_ALERTS)
    if state != "all":
        query = query.where(Alert.status == state)
    with context.database.reading() as session:
        alerts = session.scalars(query).all()
        return [
            alert_view(alert)
            for alert in alerts
            if caller.admin or alert.labels.get("username") == caller.username
        ]


class MonitoringToken(BaseModel):
    token: str = Field(description="What Prometheus and Alertmanager send to PAI.")


@router.get(
    "/monitoring/token", response_model=MonitoringToken, responses=error_responses(401, 403)
)
def get_monitoring_token(context: Context, _admin: Admin) -> MonitoringToken:
    """The monitoring token (administrators only): it reads every job's metrics."""
    return MonitoringToken(token=monitoring_token(context.settings))


class CordonRequest(BaseModel):
    reason: str = Field(default="", max_length=1000)


class NodeMessage(BaseModel):
    message: str


@router.put(
    "/cluster/nodes/{node}/cordon",
    response_model=NodeMessage,
    responses=error_responses(400, 401, 403),
)
def cordon_node(node: str, body: CordonRequest, context: Context, admin: Admin) -> NodeMessage:
    """Place nothing new on the node (its running tasks go on) until it is uncordoned."""
    controller = _known_node(context, node)
    with context.database.session() as session:
        cordon(session, node, admin.username, body.reason or "cordoned by hand")
    controller.wake()
    return NodeMessage(message=f"node {node} is cordoned")


@router.delete(
    "/cluster/nodes/{node}/cordon",
    response_model=NodeMessage,
    responses=error_responses(400, 401, 403),
)
def uncordon_node(node: str, context: Context, admin: Admin) -> NodeMessage:
    """Let the scheduler place tasks on the node again."""
    controller = _known_node(context, node)
    with context.database.session() as session:
        uncordon(session, node, admin.username)
    controller.wake()
    return NodeMessage(message=f"node {node} takes tasks again")


def _known_node(context: Context, node: str) -> ControlPlane:
    controller = context.control_plane
    if node not in {spec.name for spec in controller.cluster.nodes}:
        known = ", ".join(spec.name for spec in controller.cluster.nodes)
        raise InvalidParametersError(f"path.node: no node {node!r} in the cluster ({known})")
    return controller


class UsagePoint(BaseModel):
    at: datetime
    cpuPercent: float | None = None
    memoryBytes: int | None = None
    memoryLimitBytes: int | None = None
    readBytes: int | None = None
    writeBytes: int | None = None
    gpuPercent: float | None = None
    gpuMemoryPercent: float | None = None
    used: float | None = None
    total: float | None = None


class UsageSeries(BaseModel):
    scope: str
    name: str
    taskRoleName: str | None = None
    taskIndex: int | None = None
    node: str | None = None
    points: list[UsagePoint]


@router.get(
    "/jobs/{framework_name}/usage",
    response_model=list[UsageSeries],
    responses=error_responses(401, 404),
)
def job_usage(framework_name: str, context: Context, _caller: Caller) -> list[UsageSeries]:
    """CPU, memory, disk and GPU use of each of the job's tasks over the job's life."""
    with context.database.reading() as session:
        find_job(session, framework_name)
    return _series(context.service(UsageHistory).series(TASK, framework_name))


@router.get("/cluster/usage", response_model=list[UsageSeries], responses=error_responses(401))
def cluster_usage(
    context: Context,
    _caller: Caller,
    vc: Annotated[str | None, Query(description="This VC's use of its guarantee.")] = None,
    hours: Annotated[float, Query(gt=0, le=24 * 31)] = 24,
) -> list[UsageSeries]:
    """The cluster's (or a VC's) cells in use over the last `hours`, in GPUs (CPU slots on a
    cluster without GPUs)."""
    if vc is not None and vc not in context.control_plane.cluster.virtual_clusters:
        raise InvalidParametersError(f"query.vc: no virtual cluster {vc!r}")
    since = datetime.now(UTC) - timedelta(hours=hours)
    scope, name = (VC, vc) if vc is not None else (CLUSTER, CLUSTER)
    return _series(context.service(UsageHistory).series(scope, name, since=since))


def _series(found: list[Series]) -> list[UsageSeries]:
    return [
        UsageSeries(
            scope=series.scope,
            name=series.name,
            taskRoleName=series.role,
            taskIndex=series.index,
            node=series.node,
            points=[
                UsagePoint(
                    at=point.at,
                    cpuPercent=point.values["cpu_percent"],
                    memoryBytes=_whole(point.values["memory_bytes"]),
                    memoryLimitBytes=_whole(point.values["memory_limit_bytes"]),
                    readBytes=_whole(point.values["read_bytes"]),
                    writeBytes=_whole(point.values["write_bytes"]),
                    gpuPercent=point.values["gpu_percent"],
                    gpuMemoryPercent=point.values["gpu_memory_percent"],
                    used=point.values["used"],
                    total=point.values["total"],
                )
                for point in series.points
            ],
        )
        for series in found
    ]


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)
