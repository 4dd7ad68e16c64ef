"""A job's submission id (`jobs.submission_id`): what a client that sends the same submission
again, not knowing whether the first arrived (its answer was lost), names it by, so that the
second is answered as the first was instead of as a conflict."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_submission_ids"
down_revision = "0010_sign_ins"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("submission_id", sa.String(64), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE on both backends: SQLite's batch mode would rebuild `jobs` and lose
    # its count triggers (migration 0007).
    op.execute("ALTER TABLE jobs DROP COLUMN submission_id")
