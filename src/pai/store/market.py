"""Queries over marketplace items and their stars."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from pai.store.sharing import MarketItemRow, MarketStarRow


def all_items(session: Session) -> Sequence[MarketItemRow]:
    """Every item, newest first (the marketplace holds thousands at most: filtering and
    visibility are applied to this list)."""
    return session.scalars(
        select(MarketItemRow).order_by(MarketItemRow.created_at.desc(), MarketItemRow.name)
    ).all()


def find_item(session: Session, item_id: str) -> MarketItemRow | None:
    return session.get(MarketItemRow, item_id)


def star_counts(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(MarketStarRow.item_id, func.count()).group_by(MarketStarRow.item_id)
    ).all()
    return {item_id: count for item_id, count in rows}


def starred_by(session: Session, username: str) -> set[str]:
    return set(
        session.scalars(select(MarketStarRow.item_id).where(MarketStarRow.username == username))
    )


def star_users(session: Session, item_id: str) -> list[str]:
    return list(
        session.scalars(
            select(MarketStarRow.username)
            .where(MarketStarRow.item_id == item_id)
            .order_by(MarketStarRow.username)
        )
    )


def add_star(session: Session, item_id: str, username: str) -> bool:
    """Star the item for the user; False if it was starred already."""
    if session.get(MarketStarRow, (item_id, username)) is not None:
        return False
    session.add(MarketStarRow(item_id=item_id, username=username))
    return True


def remove_star(session: Session, item_id: str, username: str) -> bool:
    result = session.execute(
        delete(MarketStarRow).where(
            MarketStarRow.item_id == item_id, MarketStarRow.username == username
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
