"""Many rows in one statement parameter on PostgreSQL: a JSON array of objects that
`jsonb_to_recordset` turns back into typed rows.

The platform's batch writes (a batch of submissions, a controller pass's changed jobs) would
otherwise send a parameter per value: psycopg converts a statement of more than 50
parameters anew each time it runs (for ten jobs, 140 parameters and 0.7 ms of Python), and
PostgreSQL plans each one. A statement with one parameter is converted once and prepared by
the server, and the whole batch is serialised by one `json.dumps`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnClause, Text, bindparam, cast, column, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.selectable import TableValuedAlias

ROWS_PARAMETER = "rows"
"""The name of the statement parameter that holds the document (`rows_documents`)."""
MAX_DOCUMENT_CHARACTERS = 64 * 1024 * 1024
"""The longest document of one statement: PostgreSQL refuses a `jsonb` value over 256 MB, and
a batch of the largest job files (1 MiB each, expanding to 4 Mi characters) would exceed it."""


def json_rows(columns: Sequence[ColumnClause[Any]], name: str) -> TableValuedAlias:
    """`jsonb_to_recordset(:rows) AS name(column type, ...)`: the rows of the parameter, each
    with these columns (a table's, or `column(name, type)`), typed like them; a key that an
    object lacks, and a JSON null, read as SQL NULL."""
    document = cast(bindparam(ROWS_PARAMETER, type_=Text), JSONB)
    typed = [column(each.name, each.type) for each in columns]
    return (
        func.jsonb_to_recordset(document)
        .table_valued(*typed)
        .render_derived(name=name, with_types=True)
    )


def rows_documents(rows: Sequence[Mapping[str, Any]]) -> Iterator[dict[str, str]]:
    """The parameters of statements over `json_rows` that together carry `rows`, in order:
    one JSON document of them all, or, over MAX_DOCUMENT_CHARACTERS, several (a row over it
    goes alone). Timestamps are written in ISO 8601 with their offset, which `timestamptz`
    keeps."""
    document = json.dumps(list(rows), default=_iso_timestamp)
    if len(document) <= MAX_DOCUMENT_CHARACTERS or len(rows) == 1:
        yield {ROWS_PARAMETER: document}
        return
    half = len(rows) // 2
    yield from rows_documents(rows[:half])
    yield from rows_documents(rows[half:])


def _iso_timestamp(value: object) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    if value.tzinfo is None:  # as `UtcDateTime` refuses it: its zone would be the server's
        raise ValueError(f"naive datetime {value!r} given; use an aware UTC datetime")
    return value.isoformat()
