"""Reading a large top-level JSON list one element at a time, knowing each element's line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pai.sim.traces.errors import TraceFormatError

_CHUNK_CHARS = 1 << 20
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = frozenset("0123456789.eE+-")


class JsonListReader:
    """Iterates ``(line, element)`` over a JSON list without holding the whole text in memory.

    The standard library has no incremental parser, so the reader keeps a sliding buffer and
    decodes one element at a time with `json.JSONDecoder.raw_decode`, reading more text when an
    element is cut by the buffer's end.
    """

    def __init__(self, stream: IO[str], path: Path) -> None:
        self._stream = stream
        self._path = path
        self._decoder = json.JSONDecoder()
        self._buffer = ""
        self._pos = 0
        self._counted_to = 0
        self._line = 1
        self._eof = False

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        if self._peek() != "[":
            raise self._error(self._pos, "expected a JSON list")
        self._pos += 1
        if self._peek() == "]":
            self._pos += 1
            self._expect_end()
            return
        while True:
            if self._peek() is None:
                raise self._error(self._pos, "the JSON list is not closed")
            line = self._line_at(self._pos)
            yield line, self._decode_element()
            separator = self._peek()
            self._pos += 1
            if separator == "]":
                self._expect_end()
                return
            if separator != ",":
                raise self._error(self._pos - 1, "expected ',' or ']' after a list element")

    def _decode_element(self) -> Any:
        while True:
            try:
                element, end = self._decoder.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as exc:
                if self._read_more():
                    continue
                raise self._error(exc.pos, f"invalid JSON: {exc.msg}") from None
            # A number cut by the buffer's end decodes as a shorter number ("6.5e3" cut after
            # "6." reads as 6), so a number must be followed by a character that ends it.
            cut = end == len(self._buffer) or self._buffer[end] in _NUMBER_TAIL
            if isinstance(element, int | float) and cut and self._read_more():
                continue
            self._pos = end
            return element

    def _peek(self) -> str | None:
        while True:
            self._pos = _WHITESPACE.match(self._buffer, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buffer):
                return self._buffer[self._pos]
            if not self._read_more():
                return None

    def _read_more(self) -> bool:
        if self._eof:
            return False
        chunk = self._stream.read(_CHUNK_CHARS)
        if not chunk:
            self._eof = True
            return False
        self._line_at(self._pos)
        self._buffer = self._buffer[self._pos :] + chunk
        self._pos = 0
        self._counted_to = 0
        return True

    def _line_at(self, position: int) -> int:
        if position >= self._counted_to:
            self._line += self._buffer.count("\n", self._counted_to, position)
        else:
            self._line -= self._buffer.count("\n", position, self._counted_to)
        self._counted_to = position
        return self._line

    def _expect_end(self) -> None:
        if self._peek() is not None:
            raise self._error(self._pos, "unexpected text after the JSON list")

    def _error(self, position: int, message: str) -> TraceFormatError:
        return TraceFormatError(self._path, self._line_at(position), message)
