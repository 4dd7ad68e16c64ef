"""Persistence: SQLAlchemy models, queries and Alembic migrations (SQLite and PostgreSQL)."""

from pai.store import sharing  # noqa: F401  (registers its tables with Base.metadata)
from pai.store.database import Database, head_revision
from pai.store.models import Base, Group, Token, User

__all__ = ["Base", "Database", "Group", "Token", "User", "head_revision"]
