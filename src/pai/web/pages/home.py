"""The home page: the visitor's recent jobs, their virtual clusters and what is free."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from pai.monitoring.history import UsageHistory
from pai.server.deps import Context
from pai.server.joblist import JobListQuery
from pai.server.jobviews import list_item
from pai.web.capacity import Capacity
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor
from pai.web.templating import render
from pai.web.usage import capacity_chart

router = portal_router()

RECENT_JOBS = 8
ACTIVE_STATES = ("WAITING", "RUNNING", "STOPPING")


@router.get("/", name="portal.home")
def home(request: Request, context: Context, visitor: CurrentVisitor) -> HTMLResponse:
    mine = (visitor.username,)
    with context.database.reading() as session:
        recent = [
            list_item(job, tags)
            for job, tags in JobListQuery(usernames=mine, limit=RECENT_JOBS).page(session)
        ]
        counts = {
            state: JobListQuery(usernames=mine, states=(state,)).count(session)
            for state in ACTIVE_STATES
        }
    capacity = Capacity.of(context)
    vcs = {
        name: vc
        for name, vc in capacity.view.virtual_clusters().items()
        if visitor.principal.may_use_virtual_cluster(name)
    }
    nodes = capacity.view.nodes()
    return render(
        request,
        "home.html",
        nav="home",
        recent=recent,
        counts=counts,
        capacity=capacity,
        vcs=vcs,
        nodes=nodes,
        cluster=capacity.cluster(nodes),
        healthy_nodes=sum(node.healthy for node in nodes),
        use_over_time=capacity_chart(context.service(UsageHistory), capacity.unit),
    )
