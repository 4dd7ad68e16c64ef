"""Entry point of the `pai` command: one Typer app, each command group in its own module."""

from __future__ import annotations

import typer

from pai.cli.auth import login, logout, whoami
from pai.cli.cluster import cluster, vc
from pai.cli.failures import run
from pai.cli.groups import group_app
from pai.cli.jobs import events, job, jobs, stop, tag, untag
from pai.cli.logs import logs
from pai.cli.market import market_app
from pai.cli.monitoring import admin_app, alerts, monitoring_app
from pai.cli.serve import serve_app
from pai.cli.sim import sim
from pai.cli.ssh import ssh, sshkey_app
from pai.cli.storage import audit, storage_app
from pai.cli.submit import submit
from pai.cli.tokens import token_app
from pai.cli.up import up
from pai.cli.users import user_app
from pai.cli.validate import protocol_app, validate
from pai.cli.watch import wait

JOBS = "Jobs"
CLUSTER = "Cluster"
ACCOUNT = "Account"
ADMINISTRATION = "Administration"
JOB_FILES = "Job files"
SHARING = "Sharing"
PLATFORM = "Platform"

app = typer.Typer(
    name="pai",
    help="PAI: share a GPU cluster among teams. Submit and watch jobs, administer the cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """PAI command line."""


app.command(rich_help_panel=PLATFORM)(up)
app.add_typer(serve_app, rich_help_panel=PLATFORM)

app.command(rich_help_panel=JOB_FILES)(validate)
app.add_typer(protocol_app, rich_help_panel=JOB_FILES)

app.command(rich_help_panel=ACCOUNT)(login)
app.command(rich_help_panel=ACCOUNT)(logout)
app.command(rich_help_panel=ACCOUNT)(whoami)
app.add_typer(token_app, rich_help_panel=ACCOUNT)

for command in (submit, jobs, job, logs, wait, stop, tag, untag, events):
    app.command(rich_help_panel=JOBS)(command)
app.command(rich_help_panel=JOBS)(ssh)
app.add_typer(sshkey_app, rich_help_panel=ACCOUNT)

app.command(rich_help_panel=CLUSTER)(vc)
app.command(rich_help_panel=CLUSTER)(cluster)
app.command(rich_help_panel=CLUSTER)(alerts)

app.add_typer(storage_app, rich_help_panel=SHARING)
app.add_typer(market_app, rich_help_panel=SHARING)

for sub_app in (user_app, group_app, admin_app, monitoring_app):
    app.add_typer(sub_app, rich_help_panel=ADMINISTRATION)
app.command(rich_help_panel=ADMINISTRATION)(sim)
app.command(rich_help_panel=ADMINISTRATION)(audit)


def main() -> None:
    """Console-script entry point."""
    run(app)


if __name__ == "__main__":
    main()
