"""Sharing: team storages (with the storages each job mounts and resumable uploads), the
marketplace of job templates with its stars, and the audit log of changes to both."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import JsonValue, UtcDateTime

revision = "0005_sharing"
down_revision = "0004_monitoring"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "storages",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("location", JsonValue, nullable=False),
        sa.Column("sealed_credentials", sa.Text(), nullable=True),
        sa.Column("share", sa.Boolean(), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_storages"),
        sa.UniqueConstraint("name", name="uq_storages_name"),
    )
    op.create_table(
        "job_storages",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("mount_path", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("location", JsonValue, nullable=False),
        sa.Column("sealed_credentials", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_storages_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name="pk_job_storages"),
    )
    op.create_table(
        "storage_uploads",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("storage_id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("state", JsonValue, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["storage_id"],
            ["storages.id"],
            name="fk_storage_uploads_storage_id_storages",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_storage_uploads"),
    )
    op.create_index("ix_storage_uploads_storage_id", "storage_uploads", ["storage_id"])
    op.create_index("ix_storage_uploads_username", "storage_uploads", ["username"])
    op.create_table(
        "market_items",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("author", sa.String(64), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("summary", sa.String(1024), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("categories", JsonValue, nullable=False),
        sa.Column("tags", JsonValue, nullable=False),
        sa.Column("protocol", sa.Text(), nullable=False),
        sa.Column("data_type", sa.String(32), nullable=False),
        sa.Column("data_url", sa.String(2048), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("is_private", sa.Boolean(), nullable=False),
        sa.Column("group_list", JsonValue, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("use_number", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_market_items"),
        sa.UniqueConstraint("name", name="uq_market_items_name"),
    )
    op.create_index("ix_market_items_author", "market_items", ["author"])
    op.create_table(
        "market_stars",
        sa.Column("item_id", sa.String(36), nullable=False),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("starred_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"],
            ["market_items.id"],
            name="fk_market_stars_item_id_market_items",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("item_id", "username", name="pk_market_stars"),
    )
    op.create_index("ix_market_stars_username", "market_stars", ["username"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("details", JsonValue, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    op.create_index("ix_audit_events_actor", "audit_events", ["actor"])
    op.create_index("ix_audit_events_kind_target", "audit_events", ["kind", "target"])


def downgrade() -> None:
    op.drop_table("audit_events")
    op.drop_table("market_stars")
    op.drop_table("market_items")
    op.drop_table("storage_uploads")
    op.drop_table("job_storages")
    op.drop_table("storages")
