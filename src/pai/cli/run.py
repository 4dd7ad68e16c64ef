"""`pai run`: try a job file on this machine first, with no server and no login."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from pai.cli.failures import problem_line
from pai.cli.session import key_values
from pai.cli.submit import read_text_file
from pai.cluster.detect import detect_resources
from pai.errors import ConfigurationError
from pai.executors.isolation.policy import RUNTIME_ENV, IsolationError
from pai.executors.local import LocalExecutor
from pai.executors.node.taskfiles import ProcessIdentity, SupervisorConfig
from pai.localrun.plan import (
    RunPlan,
    choose_task,
    differences,
    label,
    load_job,
    missing_secrets,
    plan_run,
)
from pai.localrun.relay import Relay
from pai.localrun.runner import LocalRun, Outcome, ending
from pai.localrun.shell import ShellInput
from pai.protocol import ProtocolError
from pai.sdk import InvalidArgumentError
from pai.settings import Settings


def run(
    file: Annotated[Path, typer.Argument(help="The job file.", metavar="FILE", show_default=False)],
    parameter: Annotated[
        list[str] | None,
        typer.Option(
            "--parameter",
            "-p",
            metavar="NAME=VALUE",
            help="Override a parameter the job declares (repeatable).",
        ),
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret", metavar="NAME=VALUE", help="Give a secret the commands use (repeatable)."
        ),
    ] = None,
    secrets_file: Annotated[
        Path | None,
        typer.Option(
            "--secrets-file", metavar="FILE", help="A YAML mapping of secret names to values."
        ),
    ] = None,
    role: Annotated[str | None, typer.Option("--role", help="Run only this role's task.")] = None,
    index: Annotated[
        int | None, typer.Option("--index", help="Which task of --role (default 0).")
    ] = None,
    shell: Annotated[
        bool,
        typer.Option(
            "--shell",
            help="Open a shell in the task's environment instead of its commands "
            "(the first task, unless --role/--index say).",
        ),
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the tasks' working directories and logs.")
    ] = False,
) -> None:
    """Run a job file here, every task as a node of PAI would: no server, no login.

    Tasks run in containers of their images where podman is installed (PAI_ISOLATION chooses,
    as on a node), directly on this machine otherwise, each on its own loopback address with the
    PAI_* variables, ports and peers of a cluster, the job's runtime plugins, completion and
    retry policies. Output lines say which task printed them. What cannot be as on the cluster
    (GPUs, storages, images) is said first. Ctrl-C stops every task with its grace period.
    Exit code: 0 if the job succeeded, the failing task's exit code if it failed, 130 if
    stopped.
    """
    text = read_text_file(str(file))
    given = {**_secrets_file(secrets_file), **key_values(secret or [], "--secret")}
    try:
        spec, secrets = load_job(text, key_values(parameter or [], "--parameter"), given)
    except ProtocolError as error:
        for problem in error.problems:
            typer.echo(problem_line(str(file), problem), err=True)
        typer.echo(f"error: {file} is not a valid job; nothing ran", err=True)
        raise typer.Exit(1) from None
    try:
        only = choose_task(spec, role, index)
    except ValueError as error:
        raise InvalidArgumentError(str(error)) from None
    if shell and only is None:
        only = choose_task(spec, next(iter(spec.task_roles)), 0)
    plan, notes = plan_run(spec, secrets, only, detect_resources().gpu_count)
    notes += missing_secrets(text, secrets)
    try:
        settings = Settings.from_env()
    except ConfigurationError as error:
        raise InvalidArgumentError(str(error)) from None
    root = Path(tempfile.mkdtemp(prefix="pai-run-"))
    try:
        status = _run(plan, settings, root, notes, shell=shell, keep=keep)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    raise typer.Exit(status)


def _run(
    plan: RunPlan, settings: Settings, root: Path, notes: list[str], *, shell: bool, keep: bool
) -> int:
    """The run in `root`, once the job is known to be valid; its exit status."""
    nodes = [pod.node for pod in plan.pods.values()]
    try:
        config = SupervisorConfig(
            isolation=settings.isolation_policy, lifeline=ProcessIdentity.of(os.getpid())
        )
        executor = LocalExecutor(root / "state", jobs_dir=root / "jobs", config=config, nodes=nodes)
    except IsolationError as error:
        raise InvalidArgumentError(str(error)) from None
    isolation = executor.node_isolation
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    relay = Relay(sys.stdout.buffer, sys.stderr.buffer, colour=colour, prefixed=not shell)
    runtime_env = {name: os.environ[name] for name in (*RUNTIME_ENV, "PATH") if name in os.environ}
    for note in [*differences(plan, isolation, settings.isolation, runtime_env), *notes]:
        relay.note(None, note)
    problem = isolation.problem or executor.node_problem()
    if problem is not None:
        relay.note(None, f"cannot run the job here: {problem}")
        return 1
    prepare = None
    if shell:
        interactive = sys.stdin.isatty()
        prepare = ShellInput(
            plan.spec,
            dict(plan.secrets),
            sys.stdin.fileno(),
            interactive=interactive,
            task_user=isolation.task_user,
        )
    local_run = LocalRun(plan, executor, relay, prepare=prepare)
    previous = {
        signum: signal.signal(signum, lambda *_: local_run.stop())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        outcome = local_run.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _report(relay, outcome)
    if keep:
        for launch in local_run.launched:
            relay.note(
                label((launch.role, launch.index)),
                f"kept its working directory {launch.working_dir} and logs {launch.log_dir}",
            )
    return outcome.exit_status


def _report(relay: Relay, outcome: Outcome) -> None:
    completion = outcome.completion
    if completion.succeeded:
        relay.note(None, "the job succeeded")
        return
    if outcome.stopped:
        relay.note(None, "the job was stopped")
        return
    verdict = outcome.classification
    if outcome.task is None or verdict is None:
        relay.note(None, f"the job failed: {completion.code} {completion.phrase}")
        return
    relay.note(
        None,
        f"the job failed: task {label(outcome.task)} ended with {ending(verdict)}; "
        f"{verdict.type.value} ({verdict.behavior.value}): {verdict.reason}",
    )
    for line in verdict.diagnostics:
        relay.note(None, f"  {line}")


def _secrets_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(read_text_file(str(path)))
    except yaml.YAMLError as error:
        raise InvalidArgumentError(f"{path}: not YAML: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict) or not all(isinstance(name, str) for name in loaded):
        raise InvalidArgumentError(f"{path}: expected a mapping of secret names to values")
    return loaded
