"""`/api/v2/virtual-clusters` and `/api/v2/cluster`: capacity, use, SKU types and nodes, for any
logged-in user. VCs are defined by the cluster file, so they are read-only here, except the
limits per user that administrators set for groups' members."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from pai.auth.directory import Directory
from pai.errors import NoUserLimitError
from pai.server.clusterviews import (
    ClusterView,
    NodeInfo,
    NodeVcUsage,
    SkuTypeInfo,
    VirtualClusterInfo,
)
from pai.server.deps import Admin, Caller, Context
from pai.server.errors import error_responses
from pai.server.routes import kubernetes
from pai.server.schemas import Message
from pai.server.vcusers import (
    GroupUserLimitInfo,
    UserLimitBody,
    VcUserLimits,
    VcUsers,
    group_limit_info,
    vc_spec,
    vc_user_limits,
    vc_users,
)
from pai.store import audit
from pai.store.userlimits import remove_group_limit, set_group_limit

router = APIRouter(tags=["cluster"])
router.include_router(kubernetes.router)  # the same cluster, as Kubernetes lists


def _view(context: Context) -> ClusterView:
    return ClusterView.of(context.control_plane)


@router.get(
    "/virtual-clusters",
    response_model=dict[str, VirtualClusterInfo] | dict[str, NodeVcUsage],
    responses=error_responses(401),
)
def list_virtual_clusters(
    context: Context,
    _caller: Caller,
    nodes: Annotated[
        str | None, Query(description="Present (any value): per-node usage instead of VCs.")
    ] = None,
) -> dict[str, VirtualClusterInfo] | dict[str, NodeVcUsage]:
    view = _view(context)
    return view.virtual_clusters() if nodes is None else view.node_usage()


@router.get(
    "/virtual-clusters/{vc}", response_model=VirtualClusterInfo, responses=error_responses(401, 404)
)
def get_virtual_cluster(vc: str, context: Context, _caller: Caller) -> VirtualClusterInfo:
    return _view(context).virtual_cluster(vc)


@router.get(
    "/virtual-clusters/{vc}/users", response_model=VcUsers, responses=error_responses(401, 404)
)
def list_vc_users(vc: str, context: Context, _caller: Caller) -> VcUsers:
    """Who uses the VC: what each user's guaranteed jobs hold against the limit that applies,
    all GPUs their jobs hold, their recent use (fair share's order) and waiting jobs."""
    plane = context.control_plane
    spec = vc_spec(plane.cluster, vc)
    with context.database.reading() as session:
        return vc_users(session, spec, plane.fairness())


@router.get(
    "/virtual-clusters/{vc}/user-limits",
    response_model=VcUserLimits,
    responses=error_responses(401, 404),
)
def get_user_limits(vc: str, context: Context, _caller: Caller) -> VcUserLimits:
    """The VC's default limit per user and the limits set for groups' members."""
    spec = vc_spec(context.control_plane.cluster, vc)
    with context.database.reading() as session:
        return vc_user_limits(session, spec)


@router.put(
    "/virtual-clusters/{vc}/user-limits/{group}",
    response_model=GroupUserLimitInfo,
    responses=error_responses(400, 401, 403, 404),
)
def set_user_limit(
    vc: str, group: str, body: UserLimitBody, context: Context, admin: Admin
) -> GroupUserLimitInfo:
    """Set the limit of each member of `group` in `vc` (administrators), replacing the VC's
    default for them; it holds from the controller's next pass and survives restarts."""
    spec = vc_spec(context.control_plane.cluster, vc)
    with context.database.session() as session:
        row = set_group_limit(
            session,
            Directory(session).group(group),
            spec.name,
            gpus=body.gpus,
            cpus=body.cpus,
            jobs=body.jobs,
            set_by=admin.username,
        )
        target = f"{spec.name}/{group}"
        audit.record(session, admin.username, "set", "user-limit", target, **body.model_dump())
        info = group_limit_info(row)
    context.control_plane.wake()
    return info


@router.delete(
    "/virtual-clusters/{vc}/user-limits/{group}",
    response_model=Message,
    responses=error_responses(401, 403, 404),
)
def remove_user_limit(vc: str, group: str, context: Context, admin: Admin) -> Message:
    """Drop the limit of `group` in `vc` (administrators): its members get the VC's default."""
    spec = vc_spec(context.control_plane.cluster, vc)
    with context.database.session() as session:
        if not remove_group_limit(session, Directory(session).group(group), spec.name):
            raise NoUserLimitError(f"group '{group}' has no limit in virtual cluster '{vc}'")
        audit.record(session, admin.username, "remove", "user-limit", f"{spec.name}/{group}")
    context.control_plane.wake()
    return Message(message=f"the limit of group '{group}' in virtual cluster '{vc}' is removed")


@router.get(
    "/cluster/sku-types",
    response_model=dict[str, SkuTypeInfo],
    response_model_exclude_none=True,  # a SKU without devices reads as OpenPAI's do
    responses=error_responses(401, 404),
)
def list_sku_types(
    context: Context,
    _caller: Caller,
    vc: Annotated[str | None, Query(description="Only the SKUs this VC has cells of.")] = None,
) -> dict[str, SkuTypeInfo]:
    return _view(context).sku_types(vc)


@router.get(
    "/virtual-clusters/{vc}/sku-types",
    response_model=dict[str, SkuTypeInfo],
    response_model_exclude_none=True,  # a SKU without devices reads as OpenPAI's do
    responses=error_responses(401, 404),
)
def list_vc_sku_types(vc: str, context: Context, _caller: Caller) -> dict[str, SkuTypeInfo]:
    """The SKUs `vc` has cells of (the path OpenPAI's SDK uses for `?vc=` above)."""
    return _view(context).sku_types(vc)


@router.get("/cluster/nodes", response_model=list[NodeInfo], responses=error_responses(401))
def list_nodes(context: Context, _caller: Caller) -> list[NodeInfo]:
    """Every node: health, leaf cells and GPUs used and free, and who holds each used leaf."""
    return _view(context).nodes()
