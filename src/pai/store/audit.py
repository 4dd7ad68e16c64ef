"""The audit log: who changed which shared object (a storage, a file, a marketplace item),
how, and when. Written in the same transaction as the change, so neither exists alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pai.store.sharing import AuditEventRow


def record(
    session: Session, actor: str, action: str, kind: str, target: str, **details: Any
) -> None:
    session.add(
        AuditEventRow(actor=actor, action=action, kind=kind, target=target, details=details)
    )


def events(
    session: Session,
    *,
    kind: str | None = None,
    target: str | None = None,
    actor: str | None = None,
    limit: int = 100,
) -> Sequence[AuditEventRow]:
    """The newest events first, optionally of one kind, target (a prefix ending in `/` takes a
    whole folder) or actor."""
    statement = select(AuditEventRow).order_by(AuditEventRow.id.desc()).limit(limit)
    if kind is not None:
        statement = statement.where(AuditEventRow.kind == kind)
    if target is not None:
        statement = statement.where(
            AuditEventRow.target.startswith(target, autoescape=True)
            if target.endswith("/")
            else AuditEventRow.target == target
        )
    if actor is not None:
        statement = statement.where(AuditEventRow.actor == actor)
    return session.scalars(statement).all()
