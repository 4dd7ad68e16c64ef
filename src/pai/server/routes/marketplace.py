"""`/api/v2/marketplace`: job templates users publish, find, star and run.

The items and their fields are openpaimarketplace's; where the paths differ, docs/marketplace.md
says how and why (one server instead of a separate service; stars under `/users/{user}/starItems`
as its older versions had them; submissions from an item counted by the server).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status
from starlette.concurrency import run_in_threadpool

from pai.errors import ForbiddenUserError
from pai.marketplace.items import ItemFields, ItemQuery, ItemView, Marketplace
from pai.server.deps import Caller, Context
from pai.server.errors import error_responses
from pai.server.jobschemas import Submitted
from pai.server.marketschemas import Item, ItemRequest, LabelCount
from pai.server.routes import jobs as jobs_api
from pai.server.schemas import Message

router = APIRouter(prefix="/marketplace", tags=["marketplace"])

READ_ERRORS = error_responses(400, 401, 404)
CHANGE_ERRORS = error_responses(400, 401, 403, 404, 409)


@router.get("/items", response_model=list[Item], responses=error_responses(400, 401))
def list_items(
    context: Context,
    caller: Caller,
    keyword: Annotated[
        str | None, Query(max_length=255, description="Part of the name, summary, text or tags.")
    ] = None,
    name: Annotated[str | None, Query(max_length=255)] = None,
    author: Annotated[str | None, Query(max_length=64)] = None,
    type: Annotated[str | None, Query(pattern="^(template|data)$")] = None,
    source: Annotated[str | None, Query(pattern="^(marketplace|pai)$")] = None,
    tags: Annotated[
        str | None, Query(max_length=1024, description="Items with all these tags.")
    ] = None,
    categories: Annotated[
        str | None, Query(max_length=1024, description="Items in any of these categories.")
    ] = None,
    starred: Annotated[bool, Query(description="Only the items the caller starred.")] = False,
) -> list[Item]:
    """The items the caller may see that match every filter, newest first."""
    query = ItemQuery(
        keyword=keyword or None,
        name=name,
        author=author,
        type=type,
        source=source,
        tags=_split(tags),
        categories=_split(categories),
        starred=starred,
    )
    with context.database.reading() as session:
        return [item(view) for view in Marketplace(session, caller).search(query)]


@router.post(
    "/items", status_code=status.HTTP_201_CREATED, response_model=Item, responses=CHANGE_ERRORS
)
def publish(body: ItemRequest, context: Context, caller: Caller) -> Item:
    """Publish an item; its job is checked (each problem with its line) and stored with its
    secret values masked."""
    with context.database.session() as session:
        return item(Marketplace(session, caller).publish(fields(body)))


@router.get("/items/{item_id}", response_model=Item, responses=READ_ERRORS)
def get_item(item_id: str, context: Context, caller: Caller) -> Item:
    with context.database.reading() as session:
        return item(Marketplace(session, caller).item(item_id))


@router.put("/items/{item_id}", response_model=Item, responses=CHANGE_ERRORS)
def update_item(item_id: str, body: ItemRequest, context: Context, caller: Caller) -> Item:
    """Replace an item's fields (its author or an administrator)."""
    with context.database.session() as session:
        return item(Marketplace(session, caller).update(item_id, fields(body)))


@router.delete("/items/{item_id}", response_model=Message, responses=CHANGE_ERRORS)
def delete_item(item_id: str, context: Context, caller: Caller) -> Message:
    with context.database.session() as session:
        Marketplace(session, caller).delete(item_id)
    return Message(message=f"marketplace item '{item_id}' is deleted")


@router.post(
    "/items/{item_id}/submissions",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Submitted,
    responses=error_responses(400, 401, 403, 404, 409, 429),
    openapi_extra=jobs_api.JOB_BODY,
)
async def submit_from_item(
    item_id: str, caller: Caller, text: jobs_api.JobText, context: Context
) -> Submitted:
    """Submit a job made from the item (its protocol, renamed and edited as the user wishes),
    exactly as `POST /jobs` does, and count it in the item's `useNumber`."""
    await run_in_threadpool(_find_item, context, caller, item_id)
    submitted = await jobs_api.accept_job(caller, text, context)
    await run_in_threadpool(record_run, context, caller, item_id, submitted.name)
    return submitted


def _find_item(context: Context, caller: Caller, item_id: str) -> None:
    with context.database.reading() as session:
        Marketplace(session, caller).item(item_id)


def record_run(context: Context, caller: Caller, item_id: str, job: str) -> None:
    with context.database.session() as session:
        Marketplace(session, caller).record_run(item_id, job)


# -- stars (as openpaimarketplace's earlier versions had them) ----------------------------------


@router.get("/items/{item_id}/starUsers", response_model=list[str], responses=READ_ERRORS)
def star_users(item_id: str, context: Context, caller: Caller) -> list[str]:
    with context.database.reading() as session:
        return Marketplace(session, caller).star_users(item_id)


@router.get(
    "/users/{username}/starItems", response_model=list[Item], responses=error_responses(401, 403)
)
def star_items(username: str, context: Context, caller: Caller) -> list[Item]:
    _require_self(caller, username)
    with context.database.reading() as session:
        views = Marketplace(session, caller).search(ItemQuery(starred=True))
    return [item(view) for view in views]


@router.put("/users/{username}/starItems/{item_id}", response_model=Item, responses=CHANGE_ERRORS)
def star(username: str, item_id: str, context: Context, caller: Caller) -> Item:
    _require_self(caller, username)
    with context.database.session() as session:
        return item(Marketplace(session, caller).star(item_id, True))


@router.delete(
    "/users/{username}/starItems/{item_id}", response_model=Item, responses=CHANGE_ERRORS
)
def unstar(username: str, item_id: str, context: Context, caller: Caller) -> Item:
    _require_self(caller, username)
    with context.database.session() as session:
        return item(Marketplace(session, caller).star(item_id, False))


# -- labels ---------------------------------------------------------------------------------------


@router.get("/tags", response_model=list[LabelCount], responses=error_responses(401))
def list_tags(context: Context, caller: Caller) -> list[LabelCount]:
    """The tags of the items the caller may see, most used first."""
    return _labels(context, caller, "tags")


@router.get("/categories", response_model=list[LabelCount], responses=error_responses(401))
def list_categories(context: Context, caller: Caller) -> list[LabelCount]:
    return _labels(context, caller, "categories")


# -- helpers --------------------------------------------------------------------------------------


def fields(body: ItemRequest) -> ItemFields:
    return ItemFields(
        name=body.name,
        type=body.type,
        protocol=body.protocol,
        summary=body.summary,
        description=body.description,
        categories=tuple(body.categories),
        tags=tuple(body.tags),
        is_public=body.isPublic,
        is_private=body.isPrivate,
        group_list=tuple(body.groupList),
        data_type=body.dataType,
        data_url=body.dataUrl,
    )


def item(view: ItemView) -> Item:
    row = view.row
    return Item(
        id=row.id,
        name=row.name,
        author=row.author,
        type=row.type,
        source=row.source,
        summary=row.summary,
        description=row.description,
        categories=row.categories,
        tags=row.tags,
        protocol=row.protocol,
        isPublic=row.is_public,
        isPrivate=row.is_private,
        groupList=row.group_list,
        dataType=row.data_type,
        dataUrl=row.data_url,
        status=row.status,
        useNumber=row.use_number,
        starNumber=view.star_number,
        starred=view.starred,
        createdAt=row.created_at,
        updatedAt=row.updated_at,
        updatedBy=row.updated_by,
    )


def _labels(context: Context, caller: Caller, kind: str) -> list[LabelCount]:
    counts: dict[str, int] = {}
    with context.database.reading() as session:
        for view in Marketplace(session, caller).search(ItemQuery()):
            for label in getattr(view.row, kind):
                counts[label] = counts.get(label, 0) + 1
    ordered = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return [LabelCount(name=name, count=count) for name, count in ordered]


def _split(values: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (values or "").split(",") if part.strip())


def _require_self(caller: Caller, username: str) -> None:
    """Stars are each user's own: nobody else reads or changes them."""
    if caller.username != username:
        raise ForbiddenUserError(f"only {username} may read or change {username}'s stars")
