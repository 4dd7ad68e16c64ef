"""Waiting for the controller lease before a controller starts (`pai up`, `pai serve
controller`): in the foreground, so that Ctrl-C ends the wait and the user is told why."""

from __future__ import annotations

import time

import typer
from rich.console import Console
from rich.markup import escape

from pai.errors import ConfigurationError
from pai.orchestrator.leadership import Leadership, LeaseTerms, holder_name
from pai.settings import Settings
from pai.store import Database
from pai.store.failures import when_store_reachable


def hold_lease(settings: Settings, address: str, console: Console) -> Leadership:
    """The lease, taken at once or after waiting as a standby for the holder to stop."""
    database = Database(settings.database_url)

    def upgrade() -> None:  # the lease's table comes with the migrations
        with database.exclusive() as connection:
            database.upgrade(connection)

    # No markup: the store's error may hold brackets ("[Errno 111]").
    try:
        when_store_reachable(
            upgrade, lambda said: console.print(said, markup=False), settings.store_wait_seconds
        )
    except ConfigurationError as problem:
        console.print(f"[red]error:[/red] {escape(str(problem))}")
        raise typer.Exit(1) from None
    leadership = Leadership(
        database, address, terms=LeaseTerms.lasting(settings.controller_lease_seconds)
    )
    if leadership.try_acquire():
        return leadership
    console.print(
        f"Another PAI controller ({holder_name(database)}) acts on this database: this one "
        "waits as a standby and takes over when it stops."
    )
    while not leadership.try_acquire():
        time.sleep(leadership.terms.renew_every)
    return leadership
