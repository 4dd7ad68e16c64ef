"""Jobs: the submitted jobs with their state machine, tags and events."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import JsonValue, UtcDateTime

revision = "0002_jobs"
down_revision = "0001_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("virtual_cluster", sa.String(64), nullable=False),
        sa.Column("priority_class", sa.String(8), nullable=False),
        sa.Column("submitted_at", UtcDateTime(), nullable=False),
        sa.Column("job_text", sa.Text(), nullable=False),
        sa.Column("spec", JsonValue, nullable=False),
        sa.Column("sealed_secrets", sa.Text(), nullable=True),
        sa.Column("total_tasks", sa.Integer(), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("total_roles", sa.Integer(), nullable=False),
        sa.Column("stop_requested_at", UtcDateTime(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("sub_state", sa.String(32), nullable=False),
        sa.Column("execution_type", sa.String(8), nullable=False),
        sa.Column("launched_at", UtcDateTime(), nullable=True),
        sa.Column("completed_at", UtcDateTime(), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("status", JsonValue, nullable=True),
        sa.Column("allocations", JsonValue, nullable=False),
        sa.Column("wait_reason", JsonValue, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.UniqueConstraint("username", "name", name="uq_jobs_username"),
    )
    op.create_index("ix_jobs_username", "jobs", ["username"])
    op.create_index("ix_jobs_virtual_cluster", "jobs", ["virtual_cluster"])
    op.create_index("ix_jobs_submitted_at", "jobs", ["submitted_at"])
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_completed_at", "jobs", ["completed_at"])
    op.create_table(
        "job_tags",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_tags_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "tag", name="pk_job_tags"),
    )
    op.create_index("ix_job_tags_tag", "job_tags", ["tag"])
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("type", sa.String(8), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("role", sa.String(255), nullable=True),
        sa.Column("task_index", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_events_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_job_events"),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])


def downgrade() -> None:
    op.drop_table("job_events")
    op.drop_table("job_tags")
    op.drop_table("jobs")
