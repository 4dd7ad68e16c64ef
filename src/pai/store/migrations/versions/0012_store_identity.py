"""The store's identity (`store_identity`): a random id made once per store, which the state
PAI keeps outside the database (a Ray node's directories, its agents' names) carries."""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0012_store_identity"
down_revision = "0011_submission_ids"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_identity",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("store_id", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_store_identity"),
    )
    op.execute(
        sa.text("INSERT INTO store_identity (id, store_id) VALUES (1, :id)").bindparams(
            id=secrets.token_hex(6)
        )
    )


def downgrade() -> None:
    op.drop_table("store_identity")
