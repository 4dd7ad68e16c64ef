"""`pai market`: find, publish, star and run job templates of the marketplace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markdown import Markdown
from rich.syntax import Syntax

from pai.cli.formatting import NONE, table
from pai.cli.session import (
    JsonOption,
    ServerOption,
    comma_list,
    connect,
    err,
    key_values,
    out,
    print_json,
)
from pai.sdk import InvalidArgumentError

market_app = typer.Typer(
    name="market",
    help="The marketplace: job templates to find, publish, star and run.",
    no_args_is_help=True,
)

ItemArgument = Annotated[str, typer.Argument(help="The item's id, or its name.")]
TagsOption = Annotated[
    list[str] | None, typer.Option("--tag", help="A tag (repeatable, or comma-separated).")
]


@market_app.command("list")
def list_items(
    keyword: Annotated[
        str | None, typer.Option("--keyword", "-k", help="In the name, summary or tags.")
    ] = None,
    tag: TagsOption = None,
    starred: Annotated[bool, typer.Option("--starred", help="Only items you starred.")] = False,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the items you may see, newest first."""
    with connect(server) as client:
        items = client.market_items(keyword=keyword, tags=comma_list(tag), starred=starred)
    if as_json:
        print_json(items)
        return
    if not items:
        out().print("No marketplace item matches.", style="dim")
        return
    result = table("NAME", "AUTHOR", "TAGS", "STARS", "RUNS", "SUMMARY", "ID")
    for item in items:
        result.add_row(
            item.name,
            item.author,
            ", ".join(item.tags) or NONE,
            f"{'★' if item.starred else ''}{item.star_number}",
            str(item.use_number),
            item.summary or NONE,
            item.id,
        )
    out().print(result)


@market_app.command("show")
def show(
    item: ItemArgument,
    protocol_only: Annotated[
        bool, typer.Option("--yaml", help="Print only the job's YAML (to save and edit).")
    ] = False,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an item: what it is, its description and its job."""
    with connect(server) as client:
        found = client.market_item(item)
    if as_json:
        print_json(found)
        return
    if protocol_only:
        out().print(found.protocol, end="", markup=False, highlight=False, soft_wrap=True)
        return
    console = out()
    console.print(f"{found.name}  ({found.type} by {found.author}, id {found.id})", style="bold")
    console.print(
        f"★ {found.star_number}  ·  run {found.use_number} times  ·  tags: "
        f"{', '.join(found.tags) or NONE}"
    )
    if found.summary:
        console.print(found.summary)
    console.print(Markdown(found.description))
    console.print(Syntax(found.protocol, "yaml", line_numbers=True))


@market_app.command("publish")
def publish(
    name: Annotated[str, typer.Argument(help="The item's name.")],
    job: Annotated[
        str | None, typer.Option("--job", help="Publish this job of yours (NAME or USER~NAME).")
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="Publish this job file.", exists=True)
    ] = None,
    summary: Annotated[str, typer.Option("--summary", help="One line saying what it does.")] = "",
    description: Annotated[
        Path | None,
        typer.Option("--description", help="A Markdown file describing it.", exists=True),
    ] = None,
    tag: TagsOption = None,
    private: Annotated[bool, typer.Option("--private", help="Only you see it.")] = False,
    group: Annotated[
        list[str] | None, typer.Option("--group", help="Share it with these groups only.")
    ] = None,
    server: ServerOption = None,
) -> None:
    """Publish a job of yours, or a job file, as a template. Its secret values are masked."""
    if (job is None) == (file is None):
        raise InvalidArgumentError("give exactly one of --job and --file")
    text = description.read_text(encoding="utf-8") if description else ""
    with connect(server) as client:
        if job is not None:
            protocol = client.job_config(job)
        else:
            assert file is not None
            protocol = file.read_text(encoding="utf-8")
        item = client.publish(
            name,
            protocol,
            summary=summary,
            description=text,
            tags=comma_list(tag),
            private=private,
            groups=comma_list(group),
        )
    err().print(f"Published {item.name} (id {item.id}).")


@market_app.command("run")
def run(
    item: ItemArgument,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE for a parameter.")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The new job's name.")] = None,
    vc: Annotated[str | None, typer.Option("--vc", help="The virtual cluster.")] = None,
    server: ServerOption = None,
) -> None:
    """Submit a job from a template."""
    with connect(server) as client:
        submitted = client.run_item(
            item, parameters=key_values(param or [], "--param"), job_name=name, virtual_cluster=vc
        )
    out().print(submitted.name)
    err().print(f"Submitted {submitted.name}; follow it with `pai wait {submitted.name}`.")


@market_app.command("star")
def star(item: ItemArgument, server: ServerOption = None) -> None:
    """Star an item."""
    with connect(server) as client:
        found = client.star(item)
    err().print(f"Starred {found.name} (★ {found.star_number}).")


@market_app.command("unstar")
def unstar(item: ItemArgument, server: ServerOption = None) -> None:
    """Take your star back."""
    with connect(server) as client:
        found = client.star(item, starred=False)
    err().print(f"Unstarred {found.name} (★ {found.star_number}).")


@market_app.command("delete")
def delete(item: ItemArgument, server: ServerOption = None) -> None:
    """Delete an item of yours (administrators: anyone's)."""
    with connect(server) as client:
        message = client.delete_item(item)
    err().print(message[:1].upper() + message[1:] + ".")
