"""`pai submit`: check the job file here, send it, and optionally wait for the job."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import typer

from pai.cli.failures import problem_line
from pai.cli.session import (
    JsonOption,
    ServerOption,
    connect,
    err,
    key_values,
    out,
    print_json,
)
from pai.cli.validate import STDIN
from pai.cli.watch import PollOption, TimeoutOption, wait_for
from pai.protocol import Problem, ProtocolError, parse_job
from pai.sdk import InvalidArgumentError, InvalidProtocolError


def submit(
    file: Annotated[str, typer.Argument(help="The job file; '-' reads it from standard input.")],
    parameter: Annotated[
        list[str] | None,
        typer.Option(
            "--parameter",
            "-p",
            metavar="KEY=VALUE",
            help="Override a parameter the job declares (repeatable); used as text.",
        ),
    ] = None,
    vc: Annotated[
        str | None, typer.Option("--vc", help="Run in this virtual cluster instead.")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the job to end; exit code as `pai wait`.")
    ] = False,
    timeout: TimeoutOption = None,
    poll: PollOption = 1.0,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a job file (checked here first).

    Problems are printed as FILE:LINE:COL: field: message, like `pai validate` does, and
    nothing is sent. With --wait, the exit code says how the job ended (see `pai wait`).
    """
    text = sys.stdin.read() if file == STDIN else read_text_file(file)
    parameters = key_values(parameter or [], "--parameter")
    try:
        parse_job(text)
    except ProtocolError as error:
        _report(file, error.problems)
    with connect(server) as client:
        try:
            submitted = client.submit(text, parameters=parameters, virtual_cluster=vc)
        except InvalidProtocolError as error:
            if not error.problems:
                raise
            edited = bool(parameters) or vc is not None
            # Lines of an edited job are those of the text sent, not of the file: drop them.
            _report(
                file, tuple(_unlocated(p) for p in error.problems) if edited else error.problems
            )
        if not wait:
            if as_json:
                print_json(submitted)
            else:
                out().print(f"Submitted {submitted.name}.")
            return
        err().print(f"Submitted {submitted.name}.")
        raise typer.Exit(wait_for(client, submitted.name, timeout, poll, as_json))


def read_text_file(file: str) -> str:
    """A job (or other) file's text; a file that cannot be read is an InvalidArgumentError."""
    try:
        with open(file, encoding="utf-8") as stream:
            return stream.read()
    except OSError as error:
        raise InvalidArgumentError(f"cannot read {file}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{file} is not UTF-8 text") from None


def _unlocated(problem: Problem) -> Problem:
    return dataclasses.replace(problem, line=None, column=None)


def _report(file: str, problems: tuple[Problem, ...]) -> None:
    """Each problem on its line, as `pai validate` prints them, then the verdict; exit 1."""
    for problem in problems:
        typer.echo(problem_line(file, problem), err=True)
    count = len(problems)
    typer.echo(
        f"error: {file} is not a valid job ({count} problem{'s' if count != 1 else ''}); "
        "nothing was submitted",
        err=True,
    )
    raise typer.Exit(1)
