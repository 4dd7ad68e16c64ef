"""Job indexes for a store of many jobs: the list API's filters in submission order, and the
controller's look-ups of new jobs and stop requests.

- `(username, submitted_at)`, `(state, submitted_at)`, `(virtual_cluster, state,
  submitted_at)` answer `GET /jobs` filtered by user, state or VC, newest first, from the index
  alone; they replace the single-column indexes on those columns.
- `ix_jobs_untaken` (partial: `status IS NULL`) holds only the jobs the controller has not taken
  in yet, and `(execution_type, stop_requested_at)` finds pending stop requests, so neither of
  the controller's checks reads the whole table.

SQLite plans queries without statistics unless ANALYZE has run, and without them it cannot
tell a user (a few hundred jobs) from a state (a large share of all jobs). The planner reads
`sqlite_stat1`, which SQLite documents as the way to steer plans; we record there the shape
every PAI store has: few jobs per user, many per state and VC. (PostgreSQL gathers real
statistics by itself.) A later ANALYZE replaces these with measured ones.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_job_indexes"
down_revision = "0002_jobs"
branch_labels = None
depends_on = None

SINGLE_COLUMN_INDEXES = ("username", "virtual_cluster", "state")
PLANNER_STATISTICS = (
    (None, "100000"),
    ("ix_jobs_username_submitted_at", "100000 200 1"),
    ("ix_jobs_state_submitted_at", "100000 20000 1"),
    ("ix_jobs_virtual_cluster_state_submitted_at", "100000 50000 10000 1"),
    ("ix_jobs_submitted_at", "100000 1"),
    ("ix_jobs_completed_at", "100000 2"),
    ("ix_jobs_untaken", "10 1"),
    ("ix_jobs_stop_requests", "100000 50000 50000"),
)
"""`sqlite_stat1` rows for `jobs`: the index's row count, then the average number of rows that
share a value of its first column, of its first two columns, and so on."""


def upgrade() -> None:
    for column in SINGLE_COLUMN_INDEXES:
        op.drop_index(f"ix_jobs_{column}", table_name="jobs")
    op.create_index("ix_jobs_username_submitted_at", "jobs", ["username", "submitted_at"])
    op.create_index("ix_jobs_state_submitted_at", "jobs", ["state", "submitted_at"])
    op.create_index(
        "ix_jobs_virtual_cluster_state_submitted_at",
        "jobs",
        ["virtual_cluster", "state", "submitted_at"],
    )
    untaken = sa.text("status IS NULL")
    op.create_index(
        "ix_jobs_untaken", "jobs", ["id"], sqlite_where=untaken, postgresql_where=untaken
    )
    op.create_index("ix_jobs_stop_requests", "jobs", ["execution_type", "stop_requested_at"])
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ANALYZE sqlite_schema")  # creates sqlite_stat1 if it does not exist
        op.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'jobs'")
        statistics = sa.table("sqlite_stat1", sa.column("tbl"), sa.column("idx"), sa.column("stat"))
        op.bulk_insert(
            statistics,
            [{"tbl": "jobs", "idx": index, "stat": stat} for index, stat in PLANNER_STATISTICS],
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'jobs'")
    for index in (
        "ix_jobs_stop_requests",
        "ix_jobs_untaken",
        "ix_jobs_virtual_cluster_state_submitted_at",
        "ix_jobs_state_submitted_at",
        "ix_jobs_username_submitted_at",
    ):
        op.drop_index(index, table_name="jobs")
    for column in SINGLE_COLUMN_INDEXES:
        op.create_index(f"ix_jobs_{column}", "jobs", [column])
