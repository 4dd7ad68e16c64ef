"""An identity epoch, raised by triggers whenever users, groups, memberships change or a token
is deleted: an API worker that remembers who bears which token needs to read only this number
to know whether what it remembers still holds, instead of reading every token again.

The triggers run in the transaction that makes the change, whichever process or tool makes it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_identity_epoch"
down_revision = "0007_job_counts"
branch_labels = None
depends_on = None

RAISE = "UPDATE identity_epoch SET epoch = epoch + 1"
CHANGES = {
    "users": ("INSERT", "UPDATE", "DELETE"),
    "groups": ("INSERT", "UPDATE", "DELETE"),
    "memberships": ("INSERT", "UPDATE", "DELETE"),
    "tokens": ("DELETE",),
}


def _sqlite_triggers() -> list[str]:
    return [
        f"CREATE TRIGGER {table}_{change.lower()}_identity AFTER {change} ON {table} "
        f"BEGIN {RAISE}; END"
        for table, changes in CHANGES.items()
        for change in changes
    ]


def _postgresql_triggers() -> list[str]:
    function = (
        "CREATE FUNCTION pai_raise_identity_epoch() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN {RAISE}; RETURN NULL; END $$"
    )
    return [function] + [
        f"CREATE TRIGGER {table}_identity AFTER {' OR '.join(changes)} ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION pai_raise_identity_epoch()"
        for table, changes in CHANGES.items()
    ]


def upgrade() -> None:
    op.create_table(
        "identity_epoch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_identity_epoch"),
    )
    op.execute("INSERT INTO identity_epoch (id, epoch) VALUES (1, 0)")
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in _postgresql_triggers() if postgresql else _sqlite_triggers():
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in CHANGES:
            op.execute(f"DROP TRIGGER {table}_identity ON {table}")
        op.execute("DROP FUNCTION pai_raise_identity_epoch()")
    else:
        for table, changes in CHANGES.items():
            for change in changes:
                op.execute(f"DROP TRIGGER {table}_{change.lower()}_identity")
    op.drop_table("identity_epoch")
