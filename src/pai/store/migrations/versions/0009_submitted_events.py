"""Every job's first event ("Submitted", at its submission time) is read from the job itself
since this revision, so the stored copies are removed: one row less per job, written by the
controller for each job it took in."""

from __future__ import annotations

from alembic import op

revision = "0009_submitted_events"
down_revision = "0008_identity_epoch"
branch_labels = None
depends_on = None

MESSAGE = "job accepted; waiting for resources"


def upgrade() -> None:
    op.execute("DELETE FROM job_events WHERE reason = 'Submitted'")


def downgrade() -> None:
    op.execute(
        "INSERT INTO job_events (job_id, at, type, reason, message) "
        f"SELECT id, submitted_at, 'Normal', 'Submitted', '{MESSAGE}' FROM jobs"
    )
