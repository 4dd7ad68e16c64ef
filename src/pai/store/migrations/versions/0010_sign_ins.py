"""Users vouched for by an OpenID Connect provider or an LDAP directory (`users.source`), and
the sign-ins in progress through the provider (`sign_ins`)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pai.store.types import UtcDateTime

revision = "0010_sign_ins"
down_revision = "0009_submitted_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE on both backends: SQLite's batch mode would rebuild `users` and lose
    # its identity-epoch triggers (migration 0008).
    op.add_column(
        "users", sa.Column("source", sa.String(16), nullable=False, server_default="local")
    )
    op.create_table(
        "sign_ins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("state_hash", sa.String(64), nullable=True),
        sa.Column("nonce", sa.String(64), nullable=False),
        sa.Column("sealed_verifier", sa.Text(), nullable=False),
        sa.Column("redirect_uri", sa.Text(), nullable=False),
        sa.Column("code_challenge", sa.String(128), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_sign_ins_user_id_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sign_ins"),
        sa.UniqueConstraint("state_hash", name="uq_sign_ins_state_hash"),
        sa.UniqueConstraint("code_hash", name="uq_sign_ins_code_hash"),
    )
    op.create_index("ix_sign_ins_expires_at", "sign_ins", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_sign_ins_expires_at", table_name="sign_ins")
    op.drop_table("sign_ins")
    op.drop_column("users", "source")
