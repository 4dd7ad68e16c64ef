"""Many rows in one statement parameter on PostgreSQL: a JSON array of objects that
`jsonb_to_recordset` turns back into typed rows.

The platform's batch writes (a batch of submissions, a controller pass's changed jobs) would
otherwise send a parameter per value: psycopg converts a statement of more than 50
parameters anew each time it runs (for ten jobs, 140 placeholders and 0.7 ms of Python), and
PostgreSQL plans each one. A statement with one parameter is converted once and prepared by
the server, and the whole batch is serialised by one `json.dumps`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnClause, Text, bindparam, cast, column, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.selectable import TableValuedAlias

ROWS_PARAMETER = "rows"
"""The name of the statement parameter that holds the document (`rows_document`)."""


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


def rows_document(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The parameters of a statement over `json_rows`: the rows as one JSON document, with
    timestamps in ISO 8601 (with their offset, which `timestamptz` keeps)."""
    return {ROWS_PARAMETER: json.dumps(list(rows), default=_iso_timestamp)}


def _iso_timestamp(value: object) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    if value.tzinfo is None:  # as `UtcDateTime` refuses it: its zone would be the server's
        raise ValueError(f"naive datetime {value!r} given; use an aware UTC datetime")
    return value.isoformat()
