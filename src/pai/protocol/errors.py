"""What the parser reports: every problem of a job file at once, each with its place in the file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job file.

    `path` is the field in dotted form (`taskRoles.worker.resourcePerInstance.gpu`, list items as
    `prerequisites[2].uri`; empty for the document as a whole). `line` and `column` are 1-based
    positions in the YAML text, or None when the problem has no place in the text.
    """

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        what = f"{self.path}: " if self.path else ""
        return f"{where}{what}{self.message}"


def _reading_order(problem: Problem) -> tuple[bool, int, int, str, str]:
    return (
        problem.line is None,
        problem.line or 0,
        problem.column or 0,
        problem.path,
        problem.message,
    )


class ProtocolError(ValueError):
    """A job file is not a valid job; `problems` lists everything found, in reading order."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        unique = sorted(set(problems), key=_reading_order)
        if not unique:
            raise ValueError("a ProtocolError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(unique)
        super().__init__(self.summary())

    def summary(self) -> str:
        """All problems, one per line, after a headline that counts them."""
        count = len(self.problems)
        headline = (
            "the job is invalid: 1 problem"
            if count == 1
            else f"the job is invalid: {count} problems"
        )
        return "\n".join([headline, *(f"  {problem}" for problem in self.problems)])
