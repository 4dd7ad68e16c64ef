"""The index of `pai`'s commands (pai.cli.main): what `pai --help` lists without importing the
commands is what each command says of itself, and every command it lists runs."""

from __future__ import annotations

import inspect

import pytest
from typer.testing import CliRunner

from pai.cli.lazy import LazyCommand, load
from pai.cli.main import COMMANDS, app


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_the_listed_summary_is_the_commands_own(command: LazyCommand) -> None:
    assert command.summary == first_paragraph(load(command.target, command.name).help)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_every_listed_command_shows_its_help(runner: CliRunner, command: LazyCommand) -> None:
    result = runner.invoke(app, [command.name, "--help"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert f"Usage: pai {command.name} " in result.output


def test_the_help_lists_every_command_in_its_panel(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})

    assert result.exit_code == 0
    panels = {command.panel for command in COMMANDS}
    for panel in panels:
        assert f"─ {panel} ─" in result.output
    for command in COMMANDS:
        (line,) = [line for line in result.output.splitlines() if f"│ {command.name} " in line]
        assert command.summary[:40] in line


def test_a_mistyped_command_gets_a_suggestion(runner: CliRunner) -> None:
    result = runner.invoke(app, ["jbos"])

    assert result.exit_code == 2
    assert "No such command 'jbos'" in result.output
    assert "Did you mean 'jobs'" in result.output
