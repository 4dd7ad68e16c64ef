"""`pai validate` checks job files offline; `pai protocol schema` exports the protocol."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from pai.cli.failures import problem_line
from pai.protocol import JobSpec, ProtocolError, job_json_schema, parse_job

protocol_app = typer.Typer(
    name="protocol",
    help="The job protocol (OpenPAI job protocol v2).",
    no_args_is_help=True,
)

STDIN = "-"


def _summary(spec: JobSpec) -> str:
    roles = len(spec.task_roles)
    return (
        f"job {spec.name!r}, {roles} task role{'s' if roles != 1 else ''}, "
        f"{spec.total_tasks} task{'s' if spec.total_tasks != 1 else ''}"
    )


def _read(source: str) -> bytes:
    return sys.stdin.buffer.read() if source == STDIN else Path(source).read_bytes()


def validate(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Job files to check; '-' reads one from standard input.", metavar="FILE..."
        ),
    ],
) -> None:
    """Check job files: print every problem as FILE:LINE:COL: field: message.

    Exits 1 if any file is invalid, 0 if all are valid.
    """
    console = Console(highlight=False, soft_wrap=True)
    all_valid = True
    for source in files:
        try:
            spec = parse_job(_read(source))
        except OSError as exc:
            all_valid = False
            console.print(f"{source}: cannot read the file: {exc.strerror or exc}", markup=False)
        except ProtocolError as exc:
            all_valid = False
            for problem in exc.problems:
                console.print(problem_line(source, problem), markup=False)
        else:
            console.print(
                Text.assemble(f"{source}: ", ("OK", "bold green"), f" ({_summary(spec)})")
            )
    raise typer.Exit(0 if all_valid else 1)


@protocol_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of job files, for editor completion and checking.

    For VS Code's YAML extension, save it (pai protocol schema > pai-job.schema.json) and map it
    to your job files under "yaml.schemas" in the settings.
    """
    typer.echo(json.dumps(job_json_schema(), indent=2, ensure_ascii=False))
