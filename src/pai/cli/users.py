"""`pai user`: user accounts (changes need an administrator)."""

from __future__ import annotations

from typing import Annotated

import typer

from pai.cli.formatting import NONE, table, yes_no
from pai.cli.session import (
    JsonOption,
    ServerOption,
    VcsOption,
    comma_list,
    connect,
    out,
    print_json,
    read_secret,
)

user_app = typer.Typer(
    name="user", help="Users (changes need an administrator).", no_args_is_help=True
)

UserArgument = Annotated[str, typer.Argument(help="The user name.")]
GroupArgument = Annotated[str, typer.Argument(help="The group name.")]
PasswordOption = Annotated[
    str | None,
    typer.Option(
        "--password",
        help="The password; asked with hidden input when not given (or read from standard "
        "input when it is not a terminal).",
    ),
]


@user_app.command("list")
def list_users(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """List users with their groups and virtual clusters."""
    with connect(server) as client:
        users = client.users()
    if as_json:
        print_json(users)
        return
    result = table("USER", "ADMIN", "GROUPS", "VIRTUAL CLUSTERS", "EMAIL")
    for user in users:
        result.add_row(
            user.username,
            yes_no(user.admin),
            ", ".join(user.grouplist) or NONE,
            ", ".join(user.virtual_cluster) or NONE,
            user.email or NONE,
        )
    out().print(result)


@user_app.command("create")
def create_user(
    username: UserArgument,
    password: PasswordOption = None,
    email: Annotated[str, typer.Option("--email", help="E-mail address.")] = "",
    admin: Annotated[bool, typer.Option("--admin", help="Make the user an administrator.")] = False,
    vc: VcsOption = None,
    server: ServerOption = None,
) -> None:
    """Create a user, in the groups that grant the given virtual clusters."""
    secret = password if password is not None else read_secret("Password", confirm=True)
    with connect(server) as client:
        message = client.create_user(
            username, secret, email=email, admin=admin, virtual_clusters=comma_list(vc) or None
        )
    out().print(message)


@user_app.command("delete")
def delete_user(username: UserArgument, server: ServerOption = None) -> None:
    """Delete a user."""
    with connect(server) as client:
        out().print(client.delete_user(username))


@user_app.command("set-password")
def set_password(
    username: UserArgument, password: PasswordOption = None, server: ServerOption = None
) -> None:
    """Set a user's password; the user's tokens stop working."""
    secret = password if password is not None else read_secret("New password", confirm=True)
    with connect(server) as client:
        out().print(client.set_password(username, secret))


@user_app.command("revoke-tokens")
def revoke_tokens(username: UserArgument, server: ServerOption = None) -> None:
    """Revoke every token of a user at once; they can log in again unless refused."""
    with connect(server) as client:
        out().print(client.revoke_user_tokens(username))


@user_app.command("add-group")
def add_group(username: UserArgument, group: GroupArgument, server: ServerOption = None) -> None:
    """Add a user to a group."""
    with connect(server) as client:
        out().print(client.add_user_to_group(username, group))


@user_app.command("remove-group")
def remove_group(username: UserArgument, group: GroupArgument, server: ServerOption = None) -> None:
    """Remove a user from a group."""
    with connect(server) as client:
        out().print(client.remove_user_from_group(username, group))
