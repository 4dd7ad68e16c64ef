"""The one error a trace loader raises for bad input, naming the file and line."""

from __future__ import annotations

from pathlib import Path


class TraceFormatError(ValueError):
    """A trace file that cannot be read as the format it claims to be.

    `line` is the 1-based line of the offending row (1 for a header problem) or None when the
    problem concerns the whole file.
    """

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {message}")
