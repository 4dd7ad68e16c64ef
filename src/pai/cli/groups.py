"""`pai group`: groups grant virtual clusters and admin rights to their members."""

from __future__ import annotations

from typing import Annotated

import typer

from pai.cli.cluster import limit_phrase
from pai.cli.formatting import NONE, table, yes_no
from pai.cli.session import (
    JsonOption,
    ServerOption,
    VcsOption,
    comma_list,
    connect,
    out,
    print_json,
)

group_app = typer.Typer(
    name="group",
    help="Groups: they grant virtual clusters and admin rights (changes need an administrator).",
    no_args_is_help=True,
)

GroupArgument = Annotated[str, typer.Argument(help="The group name.")]


@group_app.command("list")
def list_groups(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """List groups with the rights they grant."""
    with connect(server) as client:
        groups = client.groups()
    if as_json:
        print_json(groups)
        return
    result = table("GROUP", "ADMIN", "VIRTUAL CLUSTERS", "DESCRIPTION")
    for group in groups:
        result.add_row(
            group.groupname,
            yes_no(group.admin),
            ", ".join(group.virtual_clusters) or NONE,
            group.description or NONE,
        )
    out().print(result)


@group_app.command("create")
def create_group(
    name: GroupArgument,
    vc: VcsOption = None,
    admin: Annotated[bool, typer.Option("--admin", help="Members are administrators.")] = False,
    description: Annotated[str, typer.Option("--description", help="What the group is.")] = "",
    server: ServerOption = None,
) -> None:
    """Create a group whose members may use the given virtual clusters."""
    with connect(server) as client:
        message = client.create_group(
            name, description=description, admin=admin, virtual_clusters=comma_list(vc)
        )
    out().print(message)


@group_app.command("delete")
def delete_group(name: GroupArgument, server: ServerOption = None) -> None:
    """Delete a group."""
    with connect(server) as client:
        out().print(client.delete_group(name))


@group_app.command("set-vcs")
def set_vcs(
    name: GroupArgument,
    vcs: Annotated[
        list[str] | None,
        typer.Argument(help="The virtual clusters members may use (none: no VC)."),
    ] = None,
    server: ServerOption = None,
) -> None:
    """Replace the virtual clusters a group grants."""
    with connect(server) as client:
        out().print(client.update_group(name, virtual_clusters=comma_list(vcs)))


@group_app.command("limit")
def limit(
    name: GroupArgument,
    vc: Annotated[str, typer.Argument(help="The virtual cluster the limit holds in.")],
    gpus: Annotated[
        float | None, typer.Option("--gpus", min=0, help="GPUs one member may hold at once.")
    ] = None,
    cpus: Annotated[
        float | None, typer.Option("--cpus", min=0, help="CPUs one member may hold at once.")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", min=0, help="Jobs one member may run at once.")
    ] = None,
    unlimited: Annotated[
        bool, typer.Option("--unlimited", help="Members have no limit in the VC.")
    ] = False,
    remove: Annotated[
        bool, typer.Option("--remove", help="Drop the limit: members get the VC's default.")
    ] = False,
    server: ServerOption = None,
) -> None:
    """Limit what each member of a group may hold in a VC (replacing the VC's default for
    them); resources not given have no limit. `pai vc VC` shows the limits and use."""
    given = [value for value in (gpus, cpus, jobs) if value is not None]
    if remove + unlimited + bool(given) != 1:
        raise typer.BadParameter(
            "give --gpus, --cpus and/or --jobs, or --unlimited, or --remove (one of these)"
        )
    with connect(server) as client:
        if remove:
            out().print(client.remove_user_limit(vc, name))
            return
        limit = client.set_user_limit(vc, name, gpus=gpus, cpus=cpus, jobs=jobs)
    if unlimited:
        out().print(f"members of {limit.group} have no limit in VC {vc}")
    else:
        out().print(f"members of {limit.group} may have at most {limit_phrase(limit)} in VC {vc}")


@group_app.command("set-admin")
def set_admin(
    name: GroupArgument,
    admin: Annotated[bool, typer.Argument(help="true: members are administrators; false: not.")],
    server: ServerOption = None,
) -> None:
    """Grant or withdraw administrator rights to a group's members."""
    with connect(server) as client:
        out().print(client.update_group(name, admin=admin))
