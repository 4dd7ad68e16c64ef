"""Commands' help as paragraphs that Rich wraps to the terminal.

A command's help is its docstring, wrapped by hand at the source's width; Typer keeps those
line breaks inside Rich's own wrapping, so on a narrower (or wider) terminal a sentence broke
twice, leaving a word or two alone on a line. Joining each paragraph's lines first leaves the
wrapping to Rich alone; a list item, an indented line and a paragraph marked with Click's
no-rewrap marker (\\b) keep their breaks.
"""

from __future__ import annotations

import inspect
import re

from typer import _click as click
from typer.core import TyperGroup

KEEPS_ITS_BREAK = re.compile(r"\s|[-*•] |\d+[.)] ")
"""A line that starts an item of a list or an indented block, which stays on its own line."""
NO_REWRAP = "\b"


def reflowed(help_text: str) -> str:
    """`help_text` with each paragraph's hand-made line breaks joined into spaces."""
    text, marker, rest = inspect.cleandoc(help_text).partition("\f")
    paragraphs = [_joined(paragraph) for paragraph in text.split("\n\n")]
    return "\n\n".join(paragraphs) + marker + rest


def reflow_help(command: click.Command) -> None:
    """Reflow the help of `command` and of every command under it."""
    if command.help:
        command.help = reflowed(command.help)
    if isinstance(command, TyperGroup):
        for subcommand in command.commands.values():
            reflow_help(subcommand)


def _joined(paragraph: str) -> str:
    if paragraph.startswith(NO_REWRAP):
        return paragraph
    lines = paragraph.split("\n")
    joined = lines[:1]
    for line in lines[1:]:
        if KEEPS_ITS_BREAK.match(line):
            joined.append(line)
        else:
            joined[-1] = f"{joined[-1]} {line}"
    return "\n".join(joined)
