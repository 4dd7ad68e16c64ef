"""Commands imported when they run: a Typer group that lists its commands from an index.

People and scripts call `pai` all day, so starting it must not import what the command at hand
does not use (the simulator, the server, Rich's Markdown, the SDK's models). The group knows its
commands by name, module, help panel and summary; `pai --help` shows them from that index, and
only the command that runs is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import typer
from typer import _click as click  # Typer's own copy of Click, whose classes its groups take
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """A command of the group: `target` is `module:attribute`, a function (a command) or a
    `typer.Typer` (a group of commands); `summary` is the first paragraph of its help, what
    the group's help shows."""

    name: str
    target: str
    panel: str
    summary: str

    def listing(self) -> click.Command:
        """What the group's help shows, made without importing the command."""
        return TyperCommand(name=self.name, short_help=self.summary, rich_help_panel=self.panel)


class LazyGroup(TyperGroup):
    """A group of the `index`'s commands, each imported when it runs (make a subclass with its
    index and pass it as `typer.Typer(cls=...)`)."""

    index: ClassVar[Sequence[LazyCommand]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for command in self.index:
            self.add_command(command.listing())

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command to run, imported now (its listing cannot parse arguments)."""
        name, listing, rest = super().resolve_command(ctx, args)
        if name is None or listing is None:
            return name, listing, rest
        return name, load(self._target(name), name), rest

    def _target(self, name: str) -> str:
        return next(command.target for command in self.index if command.name == name)


@cache
def load(target: str, name: str) -> click.Command:
    """The click command of `module:attribute`, named `name`, its help reflowed."""
    from pai.cli.helptext import reflow_help  # with the command, not before one is chosen

    module, _, attribute = target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if isinstance(found, typer.Typer):
        command: click.Command = typer.main.get_group(found)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name=name)(found)
        command = typer.main.get_command(single)
    reflow_help(command)
    return command
