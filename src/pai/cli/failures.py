"""How a failed command ends: one `error: ...` line on standard error and exit code 1, never a
traceback."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from pai.sdk.errors import (
    ConfigError,
    InvalidArgumentError,
    InvalidProtocolError,
    PaiError,
    UnauthorizedError,
)

if TYPE_CHECKING:
    from pai.protocol import Problem

EXPECTED = (PaiError, ConfigError, InvalidArgumentError)
"""What a user can cause or meet (a refusal, an unreachable server, a bad argument); anything
else is a bug and keeps its traceback."""


def problem_line(source: str, problem: Problem) -> str:
    """`FILE:LINE:COL: path: message`, the form editors and CI logs turn into links."""
    where = source if problem.line is None else f"{source}:{problem.line}:{problem.column}"
    what = f"{problem.path}: " if problem.path else ""
    return f"{where}: {what}{problem.message}"


def error_line(error: Exception) -> str:
    """`error: job 'alice~x' not found (NoJobError)` on one line, with a hint where one helps."""
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    if isinstance(error, UnauthorizedError):
        text += "; log in again with `pai login`"
    return f"error: {text}"


def report(error: Exception) -> None:
    if isinstance(error, InvalidProtocolError):
        for problem in error.problems:
            typer.echo(problem_line("job", problem), err=True)
    typer.echo(error_line(error), err=True)


def run(app: typer.Typer) -> None:
    """Run the app; an expected failure becomes `report` and exit code 1. (Typer itself turns
    Ctrl-C into exit code 130 and usage errors into exit code 2.)"""
    try:
        app()
    except EXPECTED as error:
        report(error)
        sys.exit(1)
