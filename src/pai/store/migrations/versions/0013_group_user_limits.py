"""Limits per user that an administrator sets for a group's members in a VC
(`group_user_limits`), replacing the VC's default `userLimit` of the cluster file for them."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import UtcDateTime

revision = "0013_group_user_limits"
down_revision = "0012_store_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "group_user_limits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("virtual_cluster", sa.String(64), nullable=False),
        sa.Column("gpus", sa.Float(), nullable=True),
        sa.Column("cpus", sa.Float(), nullable=True),
        sa.Column("jobs", sa.Integer(), nullable=True),
        sa.Column("set_by", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["groups.id"],
            name="fk_group_user_limits_group_id_groups",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_group_user_limits"),
        sa.UniqueConstraint("group_id", "virtual_cluster", name="uq_group_user_limits_group_id"),
    )


def downgrade() -> None:
    op.drop_table("group_user_limits")
