"""`pai serve controller|api`: PAI's roles as processes of their own, for a deployment on
several machines against one PostgreSQL (docs/deploy.md).

Exactly one controller acts at a time; more can run as standbys that take over when it stops.
Any number of API workers serve the REST API and the portal from the database.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from rich.console import Console

from pai.cli.lease import hold_lease
from pai.cli.up import DEFAULT_PORT, check_port_free, load_settings, prepare_controller
from pai.errors import ConfigurationError
from pai.platform import ControllerRole, create_platform_app
from pai.server import build_server, settle_heap
from pai.server.logconfig import configure_logging
from pai.server.serve import server_options

CONTROLLER_PORT = 9187
LEASE_LOST_EXIT_CODE = 75
"""`pai serve controller` exits with this code when it lost the lease (run it again: it waits
as a standby); a supervisor such as systemd restarts it."""

console = Console(stderr=True)
serve_app = typer.Typer(
    name="serve", help="Run one role of PAI (controller or API workers).", no_args_is_help=True
)

Home = Annotated[Path | None, typer.Option(help="State directory (default: $PAI_HOME or ~/.pai).")]
Host = Annotated[str, typer.Option(help="Address to listen on.")]


@serve_app.command()
def controller(
    host: Host = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port of its API (TCP) and of wake-ups from API workers (UDP).")
    ] = CONTROLLER_PORT,
    advertise: Annotated[
        str | None,
        typer.Option(
            help="URL at which API workers reach this controller. Default: http://HOST:PORT "
            "(with this machine's name when listening on every address)."
        ),
    ] = None,
    home: Home = None,
    cluster: Annotated[
        Path | None, typer.Option(help="Cluster file (HiveD format); default as for `pai up`.")
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="'local', 'ray' or 'hollow' (see `pai up`).")
    ] = None,
    ray_address: Annotated[str | None, typer.Option(help="The Ray cluster's head.")] = None,
) -> None:
    """Run the controller: it schedules and drives the engine while it holds the controller
    lease. Started while another one holds it, it waits as a standby and takes over when that
    one stops renewing the lease (PAI_CONTROLLER_LEASE_SECONDS)."""
    settings, chosen, _ = prepare_controller(
        home, host, port, cluster, engine=engine, ray_address=ray_address
    )
    address = advertise or f"http://{socket.gethostname() if host == '0.0.0.0' else host}:{port}"
    lost = []

    def leave_on_lost_lease() -> None:
        lost.append(True)
        os.kill(os.getpid(), signal.SIGTERM)

    with open(settings.home / "controller.log", "a", encoding="utf-8") as log_file:
        configure_logging(settings.log_level, log_file)
        leadership = hold_lease(settings, address, console)
        role = ControllerRole(
            address=address,
            wakeups=(host, port),
            on_lease_lost=leave_on_lost_lease,
            leadership=leadership,
        )
        app = create_platform_app(settings, chosen, role=role)
        console.print(f"PAI controller {leadership.holder} acts; API workers reach it at {address}")
        settle_heap()
        build_server(app, host=host, port=port).run()
    if lost:
        console.print("[red]The controller lost its lease and stopped acting.[/red]")
        raise typer.Exit(LEASE_LOST_EXIT_CODE)


@serve_app.command()
def api(
    host: Host = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes sharing the port.")] = 1,
    home: Home = None,
) -> None:
    """Serve the REST API and the portal from the database, with WORKERS processes, beside a
    `pai serve controller` that uses the same database and secret key."""
    try:
        settings = load_settings(home)
        check_port_free(host, port)
    except (ConfigurationError, OSError) as problem:
        console.print(f"[red]error:[/red] {problem}")
        raise typer.Exit(1) from None
    os.environ["PAI_HOME"] = str(settings.home)  # what each worker process reads
    console.print(f"PAI API: {workers} worker(s) at http://{host}:{port}")
    uvicorn.run(
        "pai.platform:api_app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        **server_options(),
    )
