"""`/api/v2/kubernetes/nodes` and `/pods`: PAI's nodes and running tasks in the shape of
Kubernetes' lists, for OpenPAI's tools that read them (administrators only, as in OpenPAI)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from pai.orchestrator.intents import FINAL_STATES
from pai.server.deps import Admin, Context
from pai.server.errors import error_responses
from pai.server.kubernetes import NodeList, PodList, node_list, pod_list
from pai.store.models import JobRow

router = APIRouter(prefix="/kubernetes", tags=["kubernetes"])


@router.get("/nodes", response_model=NodeList, responses=error_responses(401, 403))
def list_nodes(context: Context, _admin: Admin) -> NodeList:
    """Every node: addresses, capacity (cpu, memory, nvidia.com/gpu) and readiness."""
    controller = context.control_plane
    return node_list(controller.cluster, controller.snapshot(), controller.node_states())


@router.get("/pods", response_model=PodList, responses=error_responses(401, 403))
def list_pods(
    context: Context,
    _admin: Admin,
    namespace: Annotated[
        str | None, Query(description="Only pods of this namespace (PAI's are in default).")
    ] = None,
) -> PodList:
    """Every placed task of a job that is not over, with its node, resources and ports."""
    with context.database.reading() as session:
        jobs = session.scalars(select(JobRow).where(JobRow.state.not_in(FINAL_STATES)))
        return pod_list(jobs, namespace)
