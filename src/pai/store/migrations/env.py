"""Alembic environment: runs migrations on the connection `Database.upgrade` hands over."""

from __future__ import annotations

from alembic import context

from pai.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "PAI migrations run through pai.store.Database.upgrade(), not the alembic CLI"
    )

context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
