"""`pai alerts`, `pai monitoring config` and `pai admin node`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from pai.cli.formatting import NONE, table
from pai.cli.session import JsonOption, ServerOption, connect, out, print_json
from pai.monitoring.rules import (
    RULES_FILE,
    TOKEN_FILE,
    Timing,
    alert_rules,
    alertmanager_config,
    prometheus_config,
)
from pai.sdk.monitoring import Alert

monitoring_app = typer.Typer(
    name="monitoring", help="Prometheus and Alertmanager for PAI.", no_args_is_help=True
)
admin_app = typer.Typer(name="admin", help="Administering the cluster.", no_args_is_help=True)
node_app = typer.Typer(name="node", help="Take nodes out of scheduling and back.")
admin_app.add_typer(node_app)


def alerts(
    state: Annotated[
        str, typer.Option(help="firing, resolved or all.", case_sensitive=False)
    ] = "firing",
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """List alerts, newest first, with what PAI did about each."""
    with connect(server) as client:
        found = client.alerts(state.lower())
    if as_json:
        print_json(found)
    elif not found:
        out().print(f"No {state.lower()} alerts.", style="dim")
    else:
        out().print(alerts_table(found))


def alerts_table(found: Sequence[Alert]) -> Table:
    shown = table("ALERT", "STATE", "SINCE", "ABOUT", "SUMMARY", "ACTIONS")
    for alert in found:
        about = alert.labels.get("job_name") or alert.labels.get("node") or NONE
        actions = "\n".join(
            f"{action.action} {action.target}: {action.status}" for action in alert.actions
        )
        shown.add_row(
            alert.name,
            Text("firing", "bold red") if alert.firing else Text("resolved", "green"),
            alert.starts_at.strftime("%Y-%m-%d %H:%M") if alert.starts_at else NONE,
            about,
            alert.annotations.get("summary", ""),
            actions or NONE,
        )
    return shown


@monitoring_app.command("config")
def monitoring_config(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write the files to.")],
    alertmanager: Annotated[
        str, typer.Option(help="Where Prometheus finds Alertmanager, HOST:PORT.")
    ] = "127.0.0.1:9093",
    idle_for: Annotated[
        str, typer.Option(help="How long a job may hold cells unused before it alerts.")
    ] = Timing.idle_for,
    hold_for: Annotated[
        str, typer.Option(help="How long the other conditions must hold.")
    ] = Timing.hold_for,
    scrape_interval: Annotated[str, typer.Option()] = Timing.scrape_interval,
    evaluation_interval: Annotated[str, typer.Option()] = Timing.evaluation_interval,
    group_wait: Annotated[
        str, typer.Option(help="How long Alertmanager gathers alerts before it sends them.")
    ] = Timing.group_wait,
    server: ServerOption = None,
) -> None:
    """Write prometheus.yml, PAI's alert rules, alertmanager.yml and the monitoring token
    (administrators only) for this PAI; docs/monitoring.md shows how to run them."""
    timing = Timing(
        idle_for=idle_for,
        hold_for=hold_for,
        scrape_interval=scrape_interval,
        evaluation_interval=evaluation_interval,
        group_wait=group_wait,
    )
    with connect(server) as client:
        token = client.monitoring_token()
        url = client.server
    directory = out_dir.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    token_path = directory / TOKEN_FILE
    token_path.touch(mode=0o600)
    os.chmod(token_path, 0o600)
    token_path.write_text(token + "\n")
    files = {
        "prometheus.yml": prometheus_config(url, directory, timing, alertmanager),
        RULES_FILE: alert_rules(timing),
        "alertmanager.yml": alertmanager_config(url, directory, timing),
    }
    for name, text in files.items():
        (directory / name).write_text(text)
    out().print(f"Wrote {', '.join([*files, TOKEN_FILE])} to {directory}.")


@node_app.command("cordon")
def cordon(
    node: Annotated[str, typer.Argument(help="The node, as `pai cluster` names it.")],
    reason: Annotated[str, typer.Option(help="Why; shown with the node.")] = "",
    server: ServerOption = None,
) -> None:
    """Place nothing new on the node; its running tasks go on."""
    with connect(server) as client:
        out().print(client.cordon(node, reason))


@node_app.command("uncordon")
def uncordon(
    node: Annotated[str, typer.Argument(help="The node, as `pai cluster` names it.")],
    server: ServerOption = None,
) -> None:
    """Let the scheduler place tasks on the node again."""
    with connect(server) as client:
        out().print(client.uncordon(node))
