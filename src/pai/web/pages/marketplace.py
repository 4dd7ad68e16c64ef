"""The marketplace in the portal: browse with a search box and tag filters, an item's page
(its description rendered, its job, stars, Run), and publishing one of your jobs after seeing
exactly what will be shared. Every action is the API's."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from pydantic import ValidationError

from pai.errors import ForbiddenUserError, PaiError
from pai.marketplace.items import SOURCE_PAI
from pai.marketplace.markdown import render_markdown
from pai.orchestrator.intents import find_job
from pai.protocol import masked_job_text
from pai.server.deps import Context
from pai.server.errors import describe_validation_errors
from pai.server.marketschemas import ItemRequest
from pai.server.routes import marketplace as market_api
from pai.web.notices import redirect, redirect_after
from pai.web.routing import portal_router
from pai.web.session import CurrentVisitor, FormVisitor, Visitor
from pai.web.templating import render

router = portal_router()

VISIBILITIES = ("public", "private", "groups")


@router.get("/marketplace", name="portal.marketplace")
def browse(
    request: Request,
    context: Context,
    visitor: CurrentVisitor,
    keyword: str = "",
    tags: str = "",
    starred: bool = False,
) -> HTMLResponse:
    chosen = [tag for tag in tags.split(",") if tag]
    items = market_api.list_items(
        context, visitor.principal, keyword=keyword or None, tags=tags or None, starred=starred
    )
    return render(
        request,
        "marketplace.html",
        nav="marketplace",
        items=items,
        keyword=keyword,
        chosen=chosen,
        starred=starred,
        all_tags=market_api.list_tags(context, visitor.principal),
        toggled=lambda tag: ",".join(
            [t for t in chosen if t != tag] if tag in chosen else [*chosen, tag]
        ),
    )


@router.get("/marketplace/publish", name="portal.market_publish_form")
def publish_form(
    request: Request, context: Context, visitor: CurrentVisitor, job: str
) -> HTMLResponse:
    protocol = _shared_job(context, visitor, job)
    return _publish_page(request, visitor, job, protocol, name=job.partition("~")[2])


@router.post("/marketplace/publish", name="portal.market_publish")
def publish(
    request: Request,
    context: Context,
    visitor: FormVisitor,
    job: Annotated[str, Form()],
    name: Annotated[str, Form()] = "",
    summary: Annotated[str, Form()] = "",
    description: Annotated[str, Form()] = "",
    tags: Annotated[str, Form()] = "",
    visibility: Annotated[str, Form()] = "public",
    groups: Annotated[str, Form()] = "",
    confirmed: Annotated[bool, Form()] = False,
) -> Response:
    """Publish the job's config as it is stored (secrets masked), never text from the form."""
    protocol = _shared_job(context, visitor, job)
    typed = {
        "name": name,
        "summary": summary,
        "description": description,
        "tags": tags,
        "visibility": visibility,
        "groups": groups,
    }
    if not confirmed:
        return _publish_page(
            request,
            visitor,
            job,
            protocol,
            message="Confirm that you checked what is shared.",
            status=400,
            **typed,
        )
    try:
        body = ItemRequest(
            name=name,
            protocol=protocol,
            summary=summary,
            description=description,
            tags=_labels(tags),
            isPublic=visibility == "public",
            isPrivate=visibility == "private",
            groupList=_labels(groups) if visibility == "groups" else [],
        )
        item = market_api.publish(body, context, visitor.principal)
    except PaiError as refused:
        return _publish_page(
            request, visitor, job, protocol, message=refused.message, status=refused.status, **typed
        )
    except ValidationError as invalid:  # the body's checks (a name on two lines, a comma in a tag)
        message = describe_validation_errors(invalid.errors())
        return _publish_page(request, visitor, job, protocol, message=message, status=400, **typed)
    return redirect(_item_url(item.id), f"{item.name} is published.")


@router.get("/marketplace/{item_id}", name="portal.market_item")
def item_page(
    request: Request, context: Context, visitor: CurrentVisitor, item_id: str
) -> HTMLResponse:
    item = market_api.get_item(item_id, context, visitor.principal)
    return render(
        request,
        "market_item.html",
        nav="marketplace",
        item=item,
        description=Markup(render_markdown(item.description)),
        may_change=item.source != SOURCE_PAI and visitor.principal.may_act_for(item.author),
    )


@router.post("/marketplace/{item_id}/star", name="portal.market_star")
def star(
    context: Context,
    visitor: FormVisitor,
    item_id: str,
    starred: Annotated[bool, Form()] = True,
) -> Response:
    def change() -> str:
        if starred:
            item = market_api.star(visitor.username, item_id, context, visitor.principal)
            return f"You starred {item.name}."
        item = market_api.unstar(visitor.username, item_id, context, visitor.principal)
        return f"You took your star back from {item.name}."

    return redirect_after(_item_url(item_id), change)


@router.post("/marketplace/{item_id}/delete", name="portal.market_delete")
def delete(context: Context, visitor: FormVisitor, item_id: str) -> Response:
    market_api.delete_item(item_id, context, visitor.principal)
    return redirect("/marketplace", "The item is deleted.")


def _shared_job(context: Context, visitor: Visitor, framework_name: str) -> str:
    """What publishing the job shares: its config as stored, with secret values masked."""
    with context.database.reading() as session:
        row = find_job(session, framework_name)
        if not visitor.principal.may_act_for(row.username):
            raise ForbiddenUserError(
                f"only {row.username} (the owner) or an administrator may publish job "
                f"'{row.framework_name}'"
            )
        return masked_job_text(row.job_text)


def _publish_page(
    request: Request,
    visitor: Visitor,
    job: str,
    protocol: str,
    *,
    message: str | None = None,
    status: int = 200,
    **typed: str,
) -> HTMLResponse:
    return render(
        request,
        "market_publish.html",
        status_code=status,
        nav="marketplace",
        job=job,
        protocol=protocol,
        masked=protocol.count("******"),
        message=message,
        typed=typed,
        visibilities=VISIBILITIES,
    )


def _labels(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _item_url(item_id: str) -> str:
    return f"/marketplace/{quote(item_id)}"
