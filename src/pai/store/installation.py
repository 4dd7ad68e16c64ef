"""Which store this is: the id that names PAI's state outside the database (see
`pai.store.models.StoreIdentity`)."""

from __future__ import annotations

from sqlalchemy import select

from pai.store.database import Database
from pai.store.models import StoreIdentity


def store_id(database: Database) -> str:
    """The store's id (12 hexadecimal digits), made when the store was created."""
    with database.reading() as session:
        found = session.scalar(select(StoreIdentity.store_id).where(StoreIdentity.id == 1))
    if found is None:
        raise RuntimeError("the store has no identity: its migrations have not run")
    return found
