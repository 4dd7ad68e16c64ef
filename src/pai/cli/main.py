"""Entry point of the `pai` command, and the index of its commands.

Every command is registered here, in the order and help panel `pai --help` shows it, with the
module that holds it and the summary `pai --help` prints (the first paragraph of its help; a
test keeps the two equal). A command's module is imported only when that command runs.
"""

from __future__ import annotations

import gc
import sys

import typer

from pai.cli.failures import run
from pai.cli.lazy import LazyCommand, LazyGroup

PLATFORM = "Platform"
JOB_FILES = "Job files"
ACCOUNT = "Account"
JOBS = "Jobs"
CLUSTER = "Cluster"
ADMINISTRATION = "Administration"
SHARING = "Sharing"

COMMANDS = (
    LazyCommand(
        "up",
        "pai.cli.up:up",
        PLATFORM,
        "Start PAI here: the REST API, the portal, the controller and the engine that runs tasks.",
    ),
    LazyCommand(
        "serve",
        "pai.cli.serve:serve_app",
        PLATFORM,
        "Run one role of PAI (controller or API workers).",
    ),
    LazyCommand(
        "validate",
        "pai.cli.validate:validate",
        JOB_FILES,
        "Check job files: print every problem as FILE:LINE:COL: field: message.",
    ),
    LazyCommand(
        "run",
        "pai.cli.run:run",
        JOB_FILES,
        "Run a job file here, every task as a node of PAI would: no server, no login.",
    ),
    LazyCommand(
        "protocol",
        "pai.cli.validate:protocol_app",
        JOB_FILES,
        "The job protocol (OpenPAI job protocol v2).",
    ),
    LazyCommand(
        "login",
        "pai.cli.auth:login",
        ACCOUNT,
        "Log in and save the server and a token in ~/.pai/config (or $PAI_CONFIG), mode 600.",
    ),
    LazyCommand(
        "logout",
        "pai.cli.auth:logout",
        ACCOUNT,
        "Revoke the saved token on the server and forget it.",
    ),
    LazyCommand(
        "whoami",
        "pai.cli.auth:whoami",
        ACCOUNT,
        "Show who you are logged in as, and until when.",
    ),
    LazyCommand("token", "pai.cli.tokens:token_app", ACCOUNT, "Your tokens."),
    LazyCommand(
        "sshkey",
        "pai.cli.ssh:sshkey_app",
        ACCOUNT,
        "The SSH public keys in your profile.",
    ),
    LazyCommand(
        "submit",
        "pai.cli.submit:submit",
        JOBS,
        "Submit a job file (checked here first).",
    ),
    LazyCommand("jobs", "pai.cli.jobs:jobs", JOBS, "List jobs, newest first."),
    LazyCommand("job", "pai.cli.jobs:job", JOBS, "Show a job as a tree of roles and tasks."),
    LazyCommand("logs", "pai.cli.logs:logs", JOBS, "Print the log of a task attempt."),
    LazyCommand(
        "wait",
        "pai.cli.watch:wait",
        JOBS,
        "Wait until a job ends, showing its progress.",
    ),
    LazyCommand(
        "stop",
        "pai.cli.jobs:stop",
        JOBS,
        "Stop a job (it ends as STOPPED; `pai wait` sees it).",
    ),
    LazyCommand("tag", "pai.cli.jobs:tag", JOBS, "Add a tag to a job."),
    LazyCommand("untag", "pai.cli.jobs:untag", JOBS, "Remove a tag from a job."),
    LazyCommand(
        "events",
        "pai.cli.jobs:events",
        JOBS,
        "Show what happened to a job's tasks (scheduling, starts, exits, retries).",
    ),
    LazyCommand(
        "ssh",
        "pai.cli.ssh:ssh",
        JOBS,
        "Open a shell in a task of an ssh-enabled job, or run one command there.",
    ),
    LazyCommand(
        "vc",
        "pai.cli.cluster:vc",
        CLUSTER,
        "Show the virtual clusters: what each is guaranteed, how much is used, its jobs; with a "
        "VC's name, also each user's use against the limit and the VC's limits per user.",
    ),
    LazyCommand(
        "cluster",
        "pai.cli.cluster:cluster",
        CLUSTER,
        "Show the nodes (address, state, GPUs and cells used and free, usage per VC) and the "
        "VCs; a node that is gone or bad is explained below the table.",
    ),
    LazyCommand(
        "alerts",
        "pai.cli.monitoring:alerts",
        CLUSTER,
        "List alerts, newest first, with what PAI did about each.",
    ),
    LazyCommand(
        "sim",
        "pai.cli.sim:sim",
        ADMINISTRATION,
        "Replay a job trace through PAI's scheduler and baselines in virtual time.",
    ),
    LazyCommand(
        "audit",
        "pai.cli.storage:audit",
        ADMINISTRATION,
        "Who changed which storage, file or marketplace item, and when (administrators).",
    ),
    LazyCommand(
        "user",
        "pai.cli.users:user_app",
        ADMINISTRATION,
        "Users (changes need an administrator).",
    ),
    LazyCommand(
        "group",
        "pai.cli.groups:group_app",
        ADMINISTRATION,
        "Groups: they grant virtual clusters and admin rights (changes need an administrator).",
    ),
    LazyCommand(
        "admin",
        "pai.cli.monitoring:admin_app",
        ADMINISTRATION,
        "Administering the cluster.",
    ),
    LazyCommand(
        "monitoring",
        "pai.cli.monitoring:monitoring_app",
        ADMINISTRATION,
        "Prometheus and Alertmanager for PAI.",
    ),
    LazyCommand(
        "storage",
        "pai.cli.storage:storage_app",
        SHARING,
        "Storages you may use and their files: list, copy in and out, remove.",
    ),
    LazyCommand(
        "market",
        "pai.cli.market:market_app",
        SHARING,
        "The marketplace: job templates to find, publish, star and run.",
    ),
)


class PaiCommands(LazyGroup):
    index = COMMANDS


app = typer.Typer(
    name="pai",
    cls=PaiCommands,
    help="PAI: share a GPU cluster among teams. Submit and watch jobs, administer the cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """PAI command line."""
    if not gc.isenabled():  # started by `main`, which has imported the command by now
        gc.freeze()
        gc.enable()


def main() -> None:
    """Console-script entry point.

    Starting imports modules, whose objects live as long as the process: the garbage collector
    would scan them again and again while they load and once more at exit, for nothing (a
    tenth of a second of a short command). So it is off while `pai` starts; what starting made
    is then frozen out of its reach before the command runs (`_root`), and so is everything
    left when the command ends.
    """
    gc.disable()
    _skip_httpx_command_line()
    try:
        run(app)
    finally:
        gc.freeze()


def _skip_httpx_command_line() -> None:
    """httpx loads its own command-line client (with click and pygments) whenever those happen
    to be installed, as they are beside PAI's server; `pai` never uses it, and it is about a
    quarter of a server command's start. Marked absent, httpx leaves it out, as it does where
    they are not installed."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
