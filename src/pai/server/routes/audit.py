"""`/api/v2/audit`: who changed which shared object (storages, their files, marketplace items,
groups' limits per user in a VC) and when, newest first. Administrators only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel

from pai.server.deps import Admin, Context
from pai.server.errors import error_responses
from pai.store import audit

router = APIRouter(prefix="/audit", tags=["audit"])


class AuditEvent(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    kind: str
    target: str
    details: dict[str, Any]


@router.get("", response_model=list[AuditEvent], responses=error_responses(400, 401, 403))
def list_events(
    context: Context,
    _admin: Admin,
    kind: Literal["storage", "file", "marketplace", "user-limit"] | None = None,
    target: Annotated[
        str | None,
        Query(
            max_length=1024,
            description="A storage or item name, or `storage:/path`; ending in `/`, everything "
            "under it.",
        ),
    ] = None,
    actor: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[AuditEvent]:
    with context.database.reading() as session:
        rows = audit.events(session, kind=kind, target=target, actor=actor, limit=limit)
        return [
            AuditEvent(
                id=row.id,
                at=row.at,
                actor=row.actor,
                action=row.action,
                kind=row.kind,
                target=row.target,
                details=row.details,
            )
            for row in rows
        ]
