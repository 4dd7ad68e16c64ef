"""`/api/v2/virtual-clusters` and `/api/v2/cluster`: capacity, use, SKU types and nodes, for any
logged-in user. VCs are defined by the cluster file, so they are read-only here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from pai.server.clusterviews import (
    ClusterView,
    NodeInfo,
    NodeVcUsage,
    SkuTypeInfo,
    VirtualClusterInfo,
)
from pai.server.deps import Caller, Context
from pai.server.errors import error_responses
from pai.server.routes import kubernetes

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
    "/cluster/sku-types",
    response_model=dict[str, SkuTypeInfo],
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
    responses=error_responses(401, 404),
)
def list_vc_sku_types(vc: str, context: Context, _caller: Caller) -> dict[str, SkuTypeInfo]:
    """The SKUs `vc` has cells of (the path OpenPAI's SDK uses for `?vc=` above)."""
    return _view(context).sku_types(vc)


@router.get("/cluster/nodes", response_model=list[NodeInfo], responses=error_responses(401))
def list_nodes(context: Context, _caller: Caller) -> list[NodeInfo]:
    """Every node: health, leaf cells and GPUs used and free, and who holds each used leaf."""
    return _view(context).nodes()
