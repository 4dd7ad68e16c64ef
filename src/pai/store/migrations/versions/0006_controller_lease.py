"""The controller lease: exactly one controller acts, others wait to take over."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import UtcDateTime

revision = "0006_controller_lease"
down_revision = "0005_sharing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "controller_lease",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("address", sa.String(255), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("acquired_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_controller_lease"),
    )


def downgrade() -> None:
    op.drop_table("controller_lease")
