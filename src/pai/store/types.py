"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

JsonValue = JSON().with_variant(JSONB(), "postgresql")
"""JSON documents: `jsonb` on PostgreSQL, text on SQLite."""


class UtcDateTime(TypeDecorator[datetime]):
    """Timestamps always stored and returned as timezone-aware UTC.

    SQLite has no time zones and hands back naive values; normalising here keeps every caller
    free of "is this naive?" checks.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given; use an aware UTC datetime")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (what every timestamp column holds)."""
    return datetime.now(UTC)
