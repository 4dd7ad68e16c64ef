"""`pai wait`, and the waiting `pai submit --wait` shares: a live status, then an exit code
that says how the job ended, so shell scripts can branch on it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from pai.cli.failures import error_line
from pai.cli.formatting import duration, state
from pai.cli.jobview import exit_summary
from pai.cli.session import JsonOption, ServerOption, connect, err, out, print_json
from pai.sdk import Client, JobDetail, WaitTimeoutError

EXIT_CODES = {"SUCCEEDED": 0, "FAILED": 1, "STOPPED": 2}
TIMEOUT_EXIT_CODE = 3

TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", min=0, help="Give up after this many seconds (exit code 3)."),
]
PollOption = Annotated[
    float, typer.Option("--poll", min=0.1, help="Seconds between two looks at the job.")
]


def wait(
    name: Annotated[str, typer.Argument(help="The job: NAME (yours) or USER~NAME.")],
    timeout: TimeoutOption = None,
    poll: PollOption = 1.0,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Wait until a job ends, showing its progress.

    Exit code: 0 if the job SUCCEEDED, 1 if it FAILED, 2 if it was STOPPED, 3 if --timeout
    passed first (1 also for errors, such as an unknown job).
    """
    with connect(server) as client:
        raise typer.Exit(wait_for(client, name, timeout, poll, as_json))


def wait_for(client: Client, name: str, timeout: float | None, poll: float, as_json: bool) -> int:
    """Follow the job until it ends or `timeout` passes; print the outcome; its exit code."""
    console = err()
    with console.status(f"waiting for {name}") as status:

        def show(job: JobDetail) -> None:
            line = progress_line(job)
            status.update(line)
            console.print(line, soft_wrap=True)

        try:
            job = client.wait(name, timeout=timeout, poll=poll, on_update=show)
        except WaitTimeoutError as error:
            typer.echo(error_line(error), err=True)
            return TIMEOUT_EXIT_CODE
    if as_json:
        print_json(job)
    else:
        out().print(outcome_line(job), soft_wrap=True)
    return EXIT_CODES.get(job.state, 1)


def progress_line(job: JobDetail) -> Text:
    """`alice~train RUNNING · 2/3 tasks running · retries 1`."""
    tasks = [task for _, task in job.tasks()]
    running = sum(task.task_state == "RUNNING" for task in tasks)
    line = Text.assemble(job.full_name, " ", state(job.state))
    if not job.finished:
        line.append(f" · {running}/{len(tasks)} tasks running")
    if job.job_status.retries:
        line.append(f" · retries {job.job_status.retries}")
    if job.state == "WAITING" and job.job_status.wait_reason is not None:
        line.append(f" · {job.job_status.wait_reason.message}")
    return line


def outcome_line(job: JobDetail) -> Text:
    """`alice~train FAILED after 3m 02s, exit 1 (...): reason`."""
    status = job.job_status
    line = Text.assemble(job.full_name, " ", state(job.state))
    line.append(
        f" after {duration(status.launched_time or status.created_time, status.completed_time)}"
    )
    if status.app_exit_code is not None and job.state != "SUCCEEDED":
        line.append(f", {exit_summary(status.app_exit_code, status.app_exit_spec)}")
        if status.app_exit_spec is not None and status.app_exit_spec.reason:
            line.append(f": {status.app_exit_spec.reason}")
    return line
