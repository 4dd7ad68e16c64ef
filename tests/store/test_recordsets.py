"""Rows sent to PostgreSQL as one JSON document (`pai.store.recordsets`) come back as the
values they were: typed like the columns they are read as, text and JSON untouched."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Integer, String, Text, column, create_engine, select

import pai.store.recordsets as recordsets
from pai.store.recordsets import json_rows, rows_documents
from pai.store.types import JsonValue, UtcDateTime

COLUMNS = [
    column("number", Integer),
    column("word", String(16)),
    column("text", Text),
    column("at", UtcDateTime()),
    column("document", JsonValue),
]


def test_rows_come_back_typed_and_unchanged(postgres_url: str) -> None:
    rows = [
        {
            "number": 7,
            "word": "WAITING",
            "text": 'quotes " and \\ backslashes, tabs\tand ünïcödé ✓',
            "at": datetime(2026, 11, 27, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
            "document": {"nested": [1, "two", None, {"three": 3.5}], "empty": {}},
        },
        {"number": 8, "document": None},  # absent keys and a JSON null read as SQL NULL
    ]
    batch = json_rows(COLUMNS, name="batch")
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as connection:
            [parameters] = rows_documents(rows)
            read = connection.execute(select(*batch.columns), parameters).all()
    finally:
        engine.dispose()
    first, second = read
    assert first.number == 7 and first.word == "WAITING"
    assert first.text == rows[0]["text"]
    assert first.at == datetime(2026, 11, 27, 10, 0, 0, 123456, tzinfo=UTC)
    assert first.document == rows[0]["document"]
    assert tuple(second) == (8, None, None, None, None)


def test_a_timestamp_without_a_zone_is_refused() -> None:
    """Its zone would be the server's, as `UtcDateTime` refuses it too."""
    with pytest.raises(ValueError, match="naive datetime"):
        next(rows_documents([{"at": datetime(2026, 11, 27, 12, 0)}]))


def test_rows_over_a_documents_length_travel_in_several_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL refuses a `jsonb` value over 256 MB: a batch of large rows is split."""
    monkeypatch.setattr(recordsets, "MAX_DOCUMENT_CHARACTERS", 100)
    rows = [{"number": index, "text": "x" * 30} for index in range(7)] + [{"text": "y" * 500}]

    documents = [json.loads(each["rows"]) for each in rows_documents(rows)]

    assert [row for document in documents for row in document] == rows
    assert all(len(json.dumps(document)) <= 100 for document in documents[:-1])
    assert documents[-1] == [{"text": "y" * 500}]  # a row over the length goes alone
