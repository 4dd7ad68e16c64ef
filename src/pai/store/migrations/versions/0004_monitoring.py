"""Monitoring: usage samples of tasks, nodes and VCs; alerts and the actions they caused;
cordoned nodes and node events."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import JsonValue, UtcDateTime

revision = "0004_monitoring"
down_revision = "0003_job_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_samples",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("role", sa.String(255), nullable=True),
        sa.Column("task_index", sa.Integer(), nullable=True),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("resolution", sa.Integer(), nullable=False),
        sa.Column("cpu_percent", sa.Float(), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_limit_bytes", sa.BigInteger(), nullable=True),
        sa.Column("read_bytes", sa.BigInteger(), nullable=True),
        sa.Column("write_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_percent", sa.Float(), nullable=True),
        sa.Column("gpu_memory_percent", sa.Float(), nullable=True),
        sa.Column("used", sa.Float(), nullable=True),
        sa.Column("total", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_usage_samples"),
    )
    op.create_index("ix_usage_samples_at", "usage_samples", ["at"])
    op.create_index("ix_usage_samples_scope_name_at", "usage_samples", ["scope", "name", "at"])
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("labels", JsonValue, nullable=False),
        sa.Column("annotations", JsonValue, nullable=False),
        sa.Column("starts_at", UtcDateTime(), nullable=False),
        sa.Column("ends_at", UtcDateTime(), nullable=True),
        sa.Column("received_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint"),
    )
    op.create_index("ix_alerts_name", "alerts", ["name"])
    op.create_index("ix_alerts_received_at", "alerts", ["received_at"])
    op.create_table(
        "alert_actions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(255), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name="fk_alert_actions_alert_id_alerts", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alert_actions"),
    )
    op.create_index("ix_alert_actions_alert_id", "alert_actions", ["alert_id"])
    op.create_table(
        "node_cordons",
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("by", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("node", name="pk_node_cordons"),
    )
    op.create_table(
        "node_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("type", sa.String(8), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_node_events"),
    )
    op.create_index("ix_node_events_node", "node_events", ["node"])


def downgrade() -> None:
    for table in ("node_events", "node_cordons", "alert_actions", "alerts", "usage_samples"):
        op.drop_table(table)
