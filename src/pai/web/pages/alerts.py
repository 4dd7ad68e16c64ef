"""Alerts, firing and resolved, with what PAI did about each; and cordoning nodes from the
cluster page. Both go through the API's own handlers."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Form, Query, Request, Response
from fastapi.responses import HTMLResponse

from pai.server.deps import Context
from pai.server.routes.monitoring import CordonRequest, cordon_node, list_alerts, uncordon_node
from pai.web.notices import redirect_after
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormAdmin
from pai.web.templating import render

router = portal_router()


@router.get("/alerts", name="portal.alerts")
def alerts(
    request: Request,
    context: Context,
    visitor: CurrentVisitor,
    state: Annotated[Literal["firing", "resolved", "all"], Query()] = "firing",
) -> HTMLResponse:
    found = list_alerts(context, visitor.principal, state)
    return render(request, "alerts.html", nav="alerts", alerts=found, state=state)


@router.post("/cluster/nodes/{node}/cordon", name="portal.cordon")
def cordon(
    node: str,
    request: Request,
    context: Context,
    admin: FormAdmin,
    reason: Annotated[str, Form()] = "",
) -> Response:
    return redirect_after(
        "/cluster",
        lambda: cordon_node(node, CordonRequest(reason=reason), context, admin.principal).message,
    )


@router.post("/cluster/nodes/{node}/uncordon", name="portal.uncordon")
def uncordon(node: str, request: Request, context: Context, admin: FormAdmin) -> Response:
    return redirect_after("/cluster", lambda: uncordon_node(node, context, admin.principal).message)
