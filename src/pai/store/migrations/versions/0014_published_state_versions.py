"""A version of the controller's published state (`controller_lease.state_version`), raised at
each publication, so that API workers re-read the state only when it changed instead of the
whole state (megabytes at thousands of nodes) twice a second."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_published_state_versions"
down_revision = "0013_group_user_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "controller_lease",
        sa.Column("state_version", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.execute("ALTER TABLE controller_lease DROP COLUMN state_version")
