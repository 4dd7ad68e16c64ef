"""Virtual clusters (their guarantee, its use, their jobs, their users against their limits)
for everybody, and the nodes with who uses each of their cells and which tasks share which GPU,
for administrators."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from sqlalchemy.orm import Session

from pai.monitoring.history import UsageHistory
from pai.server.clusterviews import LeafUsage, NodeInfo, SharedGpu, VirtualClusterInfo
from pai.server.deps import Context
from pai.server.joblist import JobListQuery
from pai.server.jobschemas import JobListItem
from pai.server.jobviews import list_item
from pai.server.vcusers import (
    UserLimitBody,
    VcUserLimits,
    VcUsers,
    vc_spec,
    vc_user_limits,
    vc_users,
)
from pai.web.capacity import Capacity, Usage
from pai.web.routing import portal_router
from pai.web.session import Admin, CurrentVisitor
from pai.web.templating import render
from pai.web.usage import capacity_chart

router = portal_router()

JOBS_SHOWN = 10
"""Running and waiting jobs listed per VC; the job list has the rest."""


@dataclass(frozen=True)
class VcRow:
    name: str
    info: VirtualClusterInfo
    usage: Usage
    opportunistic: int
    usable: bool
    """The visitor may submit to it."""
    running: list[JobListItem]
    waiting: list[JobListItem]
    use_over_time: Markup
    users: VcUsers
    limits: VcUserLimits

    @property
    def sharing(self) -> str:
        """How the VC is shared between its users: limits, then the order of waiting jobs."""
        default = limit_text(self.limits.default)
        parts = [
            f"Each user may have at most {default} at once."
            if default
            else "Users have no limit here."
        ]
        parts += [
            f"Members of {group.group}: {limit_text(group) or 'no limit'}."
            for group in self.limits.groups
        ]
        if self.users.fairShare and self.users.halfLifeSeconds is not None:
            parts.append(
                "Waiting jobs of one priority go by their users' recent use (fair share; "
                f"use counts half after {_duration(self.users.halfLifeSeconds)})."
            )
        else:
            parts.append("Waiting jobs of one priority go first come, first served.")
        return " ".join(parts)


@dataclass(frozen=True)
class NodeRow:
    info: NodeInfo
    usage: Usage
    leaves: list[LeafUsage | SharedGpu | None]
    """Each leaf cell in order: who holds it, the tasks sharing it, or None when free."""

    @property
    def jobs(self) -> list[JobOnNode]:
        """Each job with cells or shared GPUs on the node, once."""
        jobs = {
            leaf.job: JobOnNode(leaf.job, leaf.vc, leaf.priority < 0) for leaf in self.info.usage
        }
        for gpu in self.info.sharedGpus:
            for task in gpu.tasks:
                jobs.setdefault(task.job, JobOnNode(task.job, task.vc, gpu.opportunistic, True))
        return list(jobs.values())


@dataclass(frozen=True)
class JobOnNode:
    job: str
    vc: str
    opportunistic: bool
    shares: bool = False
    """It runs on part of a shared GPU."""


def used_tenths(gpu: SharedGpu) -> int:
    """How much of a shared GPU is taken, in tenths (the portal draws it in tenths)."""
    return round(10 * (1 - gpu.freeFraction))


@router.get("/virtual-clusters", name="portal.virtual_clusters")
def virtual_clusters(request: Request, context: Context, visitor: CurrentVisitor) -> HTMLResponse:
    capacity = Capacity.of(context)
    history = context.service(UsageHistory)
    plane = context.control_plane
    fairness = plane.fairness()
    with context.database.reading() as session:
        rows = [
            VcRow(
                name=name,
                info=info,
                usage=capacity.guaranteed(info),
                opportunistic=capacity.opportunistic(info),
                usable=visitor.principal.may_use_virtual_cluster(name),
                running=_jobs(session, name, ("RUNNING", "STOPPING")),
                waiting=_jobs(session, name, ("WAITING",)),
                use_over_time=capacity_chart(history, capacity.unit, name),
                users=vc_users(session, vc_spec(plane.cluster, name), fairness),
                limits=vc_user_limits(session, vc_spec(plane.cluster, name)),
            )
            for name, info in capacity.view.virtual_clusters().items()
        ]
    return render(
        request,
        "virtual_clusters.html",
        nav="vcs",
        vcs=rows,
        unit=capacity.unit,
        gpus=capacity.gpus,
        jobs_shown=JOBS_SHOWN,
    )


@router.get("/cluster", name="portal.cluster")
def cluster(request: Request, context: Context, admin: Admin) -> HTMLResponse:
    capacity = Capacity.of(context)
    nodes = capacity.view.nodes()
    rows = []
    for node in nodes:
        held: dict[int, LeafUsage | SharedGpu] = {leaf.leafIndex: leaf for leaf in node.usage}
        held.update({gpu.gpuIndex: gpu for gpu in node.sharedGpus})
        rows.append(
            NodeRow(
                info=node,
                usage=capacity.node(node),
                leaves=[held.get(index) for index in range(node.leaves.total)],
            )
        )
    return render(
        request,
        "cluster.html",
        nav="cluster",
        nodes=rows,
        total=capacity.cluster(nodes),
        unit=capacity.unit,
        healthy=sum(node.healthy for node in nodes),
        shared=[(node, gpu) for node in nodes for gpu in node.sharedGpus],
        used_tenths=used_tenths,
    )


def limit_text(limit: UserLimitBody) -> str:
    """'6 GPUs, 2 running jobs' (empty: no limit)."""
    amounts = [
        f"{amount:g} {unit}"
        for amount, unit in (
            (limit.gpus, "GPUs"),
            (limit.cpus, "CPUs"),
            (limit.jobs, "running jobs"),
        )
        if amount is not None
    ]
    return ", ".join(amounts)


def _duration(seconds: float) -> str:
    days = seconds / 86400
    if days >= 1:
        return f"{days:g} days" if days != 1 else "a day"
    return f"{seconds / 3600:g} hours"


def _jobs(session: Session, vc: str, states: tuple[str, ...]) -> list[JobListItem]:
    query = JobListQuery(virtual_clusters=(vc,), states=states, limit=JOBS_SHOWN)
    return [list_item(job, tags) for job, tags in query.page(session)]
