"""Streaming access to (possibly gzipped) CSV files with typed fields and precise errors."""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pai.sim.traces.errors import TraceFormatError

_GZIP_MAGIC = b"\x1f\x8b"
_UNIX_EPOCH = datetime(1970, 1, 1)
_DATE_START = re.compile(r"\d{4}-")


def open_text(path: Path) -> IO[str]:
    """Open a text file for reading, decompressing it when its content (not its name) is gzip."""
    with path.open("rb") as probe:
        gzipped = probe.read(2) == _GZIP_MAGIC
    if gzipped:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def parse_timestamp(text: str) -> float:
    """Seconds since the Unix epoch, from epoch seconds or an ISO date-time.

    Naive date-times are read as UTC: traces record wall-clock times without a zone, and only
    differences matter, so this keeps results independent of the machine's zone and of DST.
    """
    if _DATE_START.match(text) is None:
        return float(text)
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        return (moment - _UNIX_EPOCH).total_seconds()
    return moment.astimezone(UTC).timestamp()


class Row:
    """One CSV data row; its accessors convert a named field or raise a located error.

    Each accessor tries the common case first and only diagnoses the value when that fails,
    because loaders call them several times for each of 100k+ rows.
    """

    __slots__ = ("_columns", "_path", "line", "values")

    def __init__(self, path: Path, columns: dict[str, int], line: int, values: list[str]) -> None:
        self._path = path
        self._columns = columns
        self.line = line
        self.values = values

    def error(self, message: str) -> TraceFormatError:
        return TraceFormatError(self._path, self.line, message)

    def optional_text(self, name: str) -> str | None:
        index = self._columns.get(name)
        if index is None:
            return None
        return self.values[index].strip() or None

    def text(self, name: str) -> str:
        value = self.values[self._columns[name]].strip()
        if not value:
            raise self.error(f"column {name!r} is empty")
        return value

    def number(self, name: str, *, minimum: float | None = None) -> float:
        value = self.values[self._columns[name]]
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and (minimum is None or number >= minimum):
            return number
        raise self._number_error(name, value, minimum)

    def optional_number(self, name: str, *, minimum: float | None = None) -> float | None:
        return None if self.optional_text(name) is None else self.number(name, minimum=minimum)

    def integer(self, name: str, *, minimum: int | None = None) -> int:
        value = self.values[self._columns[name]]
        try:
            number = int(value)
        except ValueError:
            whole = self.number(name, minimum=minimum)
            if not whole.is_integer():
                message = f"column {name!r}: expected a whole number, got {value!r}"
                raise self.error(message) from None
            return int(whole)
        if minimum is None or number >= minimum:
            return number
        raise self._number_error(name, value, minimum)

    def optional_integer(self, name: str, *, minimum: int | None = None) -> int | None:
        return None if self.optional_text(name) is None else self.integer(name, minimum=minimum)

    def optional_timestamp(self, name: str) -> float | None:
        value = self.optional_text(name)
        if value is None:
            return None
        try:
            return parse_timestamp(value)
        except ValueError:
            raise self.error(
                f"column {name!r}: expected epoch seconds or a date-time, got {value!r}"
            ) from None

    def _number_error(self, name: str, value: str, minimum: float | None) -> TraceFormatError:
        if not value.strip():
            return self.error(f"column {name!r} is empty")
        try:
            number = float(value)
        except ValueError:
            return self.error(f"column {name!r}: expected a number, got {value!r}")
        if not math.isfinite(number):
            return self.error(f"column {name!r}: expected a finite number, got {value!r}")
        return self.error(f"column {name!r}: must be at least {minimum:g}, got {value!r}")


def read_csv_header(path: Path) -> list[str]:
    """The column names of a CSV file (stripped), or an empty list for an empty file."""
    with open_text(path) as stream:
        header = next(csv.reader(stream), [])
    return [name.strip() for name in header]


def iter_csv_rows(
    path: Path, required: Sequence[str], optional: Sequence[str] = ()
) -> Iterator[Row]:
    """Yield the data rows of a CSV file whose header must name every `required` column.

    Blank lines are skipped; a row with a different number of fields than the header is an error,
    because a silently shifted column would corrupt every value after it.
    """
    with open_text(path) as stream:
        reader = csv.reader(stream)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise TraceFormatError(path, None, "the file is empty, expected a CSV header") from None
        except csv.Error as exc:
            raise TraceFormatError(path, 1, f"unreadable CSV header: {exc}") from None
        missing = [name for name in required if name not in header]
        if missing:
            message = f"missing column(s) {', '.join(missing)}; found {', '.join(header)}"
            raise TraceFormatError(path, 1, message)
        wanted = set(required) | set(optional)
        columns = {name: i for i, name in enumerate(header) if name in wanted}
        width = len(header)
        try:
            for values in reader:
                if not values:
                    continue
                if len(values) != width:
                    raise TraceFormatError(
                        path, reader.line_num, f"expected {width} fields, found {len(values)}"
                    )
                yield Row(path, columns, reader.line_num, values)
        except csv.Error as exc:
            raise TraceFormatError(path, reader.line_num, f"malformed CSV: {exc}") from None
