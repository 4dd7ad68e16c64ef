"""`pai logs`: a task's log, or its lines as they come with `-f`."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from pai.cli.session import ServerOption, connect


class Stream(StrEnum):
    """The choices of --stream, the values of `LogStream`."""

    all = "all"
    stdout = "stdout"
    stderr = "stderr"
    runtime = "runtime"


def logs(
    name: Annotated[str, typer.Argument(help="The job: NAME (yours) or USER~NAME.")],
    role: Annotated[
        str | None,
        typer.Option("--role", "-r", help="The task role (needed when the job has several)."),
    ] = None,
    index: Annotated[int, typer.Option("--index", "-i", min=0, help="The task index.")] = 0,
    attempt: Annotated[
        int | None,
        typer.Option("--attempt", "-a", min=0, help="The task attempt (default: the current)."),
    ] = None,
    job_attempt: Annotated[
        int | None,
        typer.Option("--job-attempt", min=0, help="The job attempt (default: the latest)."),
    ] = None,
    stream: Annotated[
        Stream,
        typer.Option(
            "--stream",
            "-s",
            help="all (stdout and stderr interleaved), stdout, stderr, or runtime (PAI's own).",
        ),
    ] = Stream.all,
    tail: Annotated[
        int | None, typer.Option("--tail", min=1, help="Only the last this many bytes.")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Keep printing as the task writes, until the attempt ends."
        ),
    ] = False,
    server: ServerOption = None,
) -> None:
    """Print the log of a task attempt."""
    with connect(server) as client:
        if not follow:
            sys.stdout.write(
                client.logs(name, role, index, job_attempt, attempt, stream=stream.value, tail=tail)
            )
            return
        for line in client.follow_logs(
            name, role, index, job_attempt, attempt, stream=stream.value, tail=tail
        ):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
