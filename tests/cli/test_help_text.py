"""Commands' help reads as paragraphs that fill the terminal: a docstring's own line breaks do
not break a sentence a second time inside Rich's wrapping."""

from __future__ import annotations

import itertools
import subprocess

import pytest
from typer import _click as click
from typer.core import TyperGroup
from typer.testing import CliRunner

from cli.pai_runner import pai_command
from pai.cli.lazy import load
from pai.cli.main import COMMANDS, app

COLUMNS = 80
TEXT_WIDTH = COLUMNS - 2
"""Rich pads the help's prose by one column on each side."""


def description(help_output: str) -> list[list[str]]:
    """The paragraphs of prose between the usage line and the first panel, as lines."""
    lines = help_output.splitlines()
    start = next(index for index, line in enumerate(lines) if "Usage:" in line) + 1
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:]:
        if line.lstrip().startswith("╭"):
            break
        if line.strip():
            paragraphs[-1].append(line.strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [paragraph for paragraph in paragraphs if paragraph]


def lines_broken_early(help_output: str) -> list[str]:
    """Lines that end though the next line's first word would have fit on them."""
    return [
        f"{line!r} then {following!r}"
        for paragraph in description(help_output)
        for line, following in itertools.pairwise(paragraph)
        if len(line) + 1 + len(following.split()[0]) <= TEXT_WIDTH
    ]


def test_pai_login_help_wraps_its_paragraphs_once() -> None:
    shown = subprocess.run(
        [*pai_command(), "login", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": str(COLUMNS), "TERM": "dumb", "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=True,
    ).stdout

    paragraphs = description(shown)
    assert len(paragraphs) == 2, shown
    assert " ".join(paragraphs[1]).startswith(
        "With a user name, the password is checked by the cluster (or its LDAP directory). "
        "Where the cluster signs in"
    )
    assert not lines_broken_early(shown), shown


def every_command() -> list[list[str]]:
    def under(command: click.Command, path: list[str]) -> list[list[str]]:
        found = [path]
        if isinstance(command, TyperGroup):
            for name, subcommand in command.commands.items():
                found += under(subcommand, [*path, name])
        return found

    return [
        path
        for listed in COMMANDS
        for path in under(load(listed.target, listed.name), [listed.name])
    ]


@pytest.mark.parametrize("path", every_command(), ids=" ".join)
def test_every_commands_help_wraps_its_paragraphs_once(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(COLUMNS)})

    assert result.exit_code == 0, result.output
    assert not lines_broken_early(result.output), result.output
