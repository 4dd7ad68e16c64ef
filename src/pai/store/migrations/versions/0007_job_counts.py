"""Job counts per user, VC and state, kept by triggers: a job list's total count then reads a
few rows of `job_counts` instead of counting the matching jobs, which took a third of a second
at a million jobs on PostgreSQL.

The triggers run in the transaction that inserts, deletes or changes the state of a job, so the
counts are exactly as consistent as the jobs themselves; existing jobs are counted once here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_job_counts"
down_revision = "0006_controller_lease"
branch_labels = None
depends_on = None

KEY = "(username, virtual_cluster, state)"
ADD = (
    "INSERT INTO job_counts (username, virtual_cluster, state, count) "
    "VALUES (NEW.username, NEW.virtual_cluster, NEW.state, 1) "
    f"ON CONFLICT {KEY} DO UPDATE SET count = job_counts.count + 1"
)
REMOVE = (
    "UPDATE job_counts SET count = count - 1 WHERE username = OLD.username "
    "AND virtual_cluster = OLD.virtual_cluster AND state = OLD.state"
)
CHANGED = (
    "OLD.state IS DISTINCT FROM NEW.state OR OLD.username IS DISTINCT FROM NEW.username "
    "OR OLD.virtual_cluster IS DISTINCT FROM NEW.virtual_cluster"
)

SQLITE_TRIGGERS = (
    f"CREATE TRIGGER jobs_counted_in AFTER INSERT ON jobs BEGIN {ADD}; END",
    f"CREATE TRIGGER jobs_counted_out AFTER DELETE ON jobs BEGIN {REMOVE}; END",
    "CREATE TRIGGER jobs_counted_again AFTER UPDATE OF state, username, virtual_cluster ON jobs "
    f"WHEN {CHANGED.replace('IS DISTINCT FROM', 'IS NOT')} BEGIN {REMOVE}; {ADD}; END",
)
POSTGRESQL_TRIGGERS = (
    f"""CREATE FUNCTION pai_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN {REMOVE}; END IF;
        IF TG_OP <> 'DELETE' THEN {ADD}; END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER jobs_counted AFTER INSERT OR DELETE ON jobs "
    "FOR EACH ROW EXECUTE FUNCTION pai_count_jobs()",
    "CREATE TRIGGER jobs_counted_again AFTER UPDATE OF state, username, virtual_cluster ON jobs "
    f"FOR EACH ROW WHEN ({CHANGED}) EXECUTE FUNCTION pai_count_jobs()",
)


def upgrade() -> None:
    op.create_table(
        "job_counts",
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("virtual_cluster", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("username", "virtual_cluster", "state", name="pk_job_counts"),
    )
    op.execute(
        "INSERT INTO job_counts (username, virtual_cluster, state, count) "
        "SELECT username, virtual_cluster, state, COUNT(*) FROM jobs "
        "GROUP BY username, virtual_cluster, state"
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRESQL_TRIGGERS if postgresql else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_counted_again ON jobs")
        op.execute("DROP TRIGGER jobs_counted ON jobs")
        op.execute("DROP FUNCTION pai_count_jobs()")
    else:
        for name in ("jobs_counted_in", "jobs_counted_out", "jobs_counted_again"):
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("job_counts")
