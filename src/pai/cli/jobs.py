"""`pai jobs`, `pai job`, `pai stop`, `pai tag`, `pai untag`, `pai events`."""

from __future__ import annotations

from typing import Annotated

import typer

from pai.cli.formatting import NONE, table, timestamp
from pai.cli.jobview import job_tree, jobs_table, usage_table
from pai.cli.session import (
    JsonOption,
    ServerOption,
    comma_list,
    connect,
    out,
    print_json,
)
from pai.cli.ssh import list_interactive_jobs

JobArgument = Annotated[str, typer.Argument(help="The job: NAME (yours) or USER~NAME.")]
TagArgument = Annotated[str, typer.Argument(help="The tag (no commas).")]
DEFAULT_LIMIT = 50


def jobs(
    user: Annotated[
        list[str] | None,
        typer.Option("--user", help="Jobs of these users (repeatable, or comma-separated)."),
    ] = None,
    vc: Annotated[
        list[str] | None, typer.Option("--vc", help="Jobs in these virtual clusters.")
    ] = None,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Jobs in these states: WAITING, RUNNING, SUCCEEDED, ..."),
    ] = None,
    keyword: Annotated[
        str | None, typer.Option("--keyword", help="Jobs whose user, name or VC contains this.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="At most this many, newest first.")
    ] = DEFAULT_LIMIT,
    everyone: Annotated[
        bool, typer.Option("--all", help="Jobs of every user (default: only yours).")
    ] = False,
    interactive: Annotated[
        bool,
        typer.Option(
            "--interactive", help="Running jobs with the ssh or tensorboard plugin, oldest first."
        ),
    ] = False,
    idle: Annotated[
        bool, typer.Option("--idle", help="With --interactive: only those idle right now.")
    ] = False,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs, newest first."""
    if interactive or idle:
        list_interactive_jobs(server, comma_list(user), idle=idle, as_json=as_json)
        return
    with connect(server) as client:
        mine = [client.username] if client.username else None
        users = comma_list(user) or (None if everyone else mine)
        found = client.jobs(
            username=users,
            vc=comma_list(vc) or None,
            state=[value.upper() for value in comma_list(state)] or None,
            keyword=keyword,
            limit=limit,
        )
    if as_json:
        print_json(found)
    elif not found:
        out().print("No jobs.", style="dim")
    else:
        out().print(jobs_table(found))


def job(
    name: JobArgument,
    usage: Annotated[
        bool, typer.Option("--usage", help="What each task used: CPU, memory and GPU.")
    ] = False,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a job as a tree of roles and tasks.

    With its state, retries, exit code explained, and every task (node, IP, GPUs, ports, exit
    code); for a WAITING job, what it waits for. With --usage, a table of each task's CPU,
    memory and GPU use over the job's life instead.
    """
    with connect(server) as client:
        found = client.job_usage(name) if usage else client.job(name)
    if as_json:
        print_json(found)
    elif isinstance(found, list):
        out().print(usage_table(found) if found else "No usage measured yet.")
    else:
        out().print(job_tree(found))


def stop(name: JobArgument, server: ServerOption = None) -> None:
    """Stop a job (it ends as STOPPED; `pai wait` sees it)."""
    with connect(server) as client:
        message = client.stop(name)
    out().print(message or f"Stopping {name}.")


def tag(name: JobArgument, value: TagArgument, server: ServerOption = None) -> None:
    """Add a tag to a job."""
    with connect(server) as client:
        client.tag(name, value)
    out().print(f"Tagged {name} with {value!r}.")


def untag(name: JobArgument, value: TagArgument, server: ServerOption = None) -> None:
    """Remove a tag from a job."""
    with connect(server) as client:
        client.untag(name, value)
    out().print(f"Removed tag {value!r} from {name}.")


def events(
    name: JobArgument,
    kind: Annotated[
        str | None, typer.Option("--type", help="Only events of this type: Normal or Warning.")
    ] = None,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what happened to a job's tasks (scheduling, starts, exits, retries)."""
    with connect(server) as client:
        found = client.events(name, type=kind)
    if as_json:
        print_json(found)
        return
    if not found:
        out().print("No events.", style="dim")
        return
    result = table("LAST SEEN", "TYPE", "TASK", "REASON", "MESSAGE", "COUNT")
    for event in found:
        task = f"{event.taskrole_name}/{event.task_index}" if event.taskrole_name else NONE
        result.add_row(
            _when(event.last_timestamp or event.first_timestamp),
            event.type,
            task,
            event.reason,
            event.message,
            str(event.count),
        )
    out().print(result)


def _when(value: object) -> str:
    """Event times: milliseconds since the epoch, or already a date string."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timestamp(int(value))
    return str(value) if value else NONE
