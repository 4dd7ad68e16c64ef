"""A control plane of many processes: the controller lease (exactly one controller acts, others
wait to take over) and the rate-limit windows every API worker counts in."""

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
        sa.Column("state", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_controller_lease"),
    )

    op.create_table(
        "rate_windows",
        sa.Column("scope", sa.String(32), nullable=False),
        sa.Column("key", sa.String(320), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "key", "window", name="pk_rate_windows"),
    )


def downgrade() -> None:
    op.drop_table("rate_windows")
    op.drop_table("controller_lease")
