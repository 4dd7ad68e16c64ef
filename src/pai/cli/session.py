"""What every server command shares: the `--server` and `--json` options, the connection from
the saved configuration, the consoles, secrets read from the terminal or standard input."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console

from pai.sdk import Client, ConfigError, InvalidArgumentError, PaiError
from pai.sdk.config import SERVER_ENV
from pai.sdk.model import ApiModel
from pai.sdk.transport import RETRY_FOR

RETRY_ENV = "PAI_RETRY_SECONDS"
"""How long a command waits for a server that does not answer (0: it fails at once)."""

WIDE_OUTPUT = 160
"""Columns of tables written to a pipe or file: no terminal says how wide, and cutting names
to 80 columns would break `pai jobs | grep`."""

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar=SERVER_ENV,
        show_envvar=True,
        help="PAI server URL (default: the one you logged in to).",
    ),
]
VcsOption = Annotated[
    list[str] | None,
    typer.Option("--vc", help="A virtual cluster (repeatable, or comma-separated)."),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the server's JSON instead of a table.")
]


def _console(stream: Any) -> Console:
    """A console that prints text as given: names and messages from the server are data, so
    Rich markup (`[red]`), emoji codes and highlighting are off."""
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(
        file=stream,
        width=WIDE_OUTPUT if wide else None,
        highlight=False,
        emoji=False,
    )


def out() -> Console:
    """The console for results (standard output)."""
    return _console(sys.stdout)


def err() -> Console:
    """The console for progress and notes (standard error)."""
    return _console(sys.stderr)


def connect(server: str | None) -> Client:
    """A client for `server` (else the current one) with its saved token, which says on
    standard error when it starts waiting for the server."""
    client = Client.from_config(server=server, retry_for=_retry_seconds(), on_retry=_say_waiting)
    if client.token is None:
        client.close()
        raise ConfigError(
            f"not logged in to {client.server}: run "
            f"`pai login --server {client.server} --username NAME`"
        )
    return client


def _retry_seconds() -> float:
    text = os.environ.get(RETRY_ENV)
    if text is None:
        return RETRY_FOR
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{RETRY_ENV} must be a number of seconds (0 or more), not {text!r}")
    return seconds


def _say_waiting(error: PaiError, seconds: float) -> None:
    err().print(f"{error}; trying again for up to {seconds:.0f} s (Ctrl-C stops)")


def raw(value: Any) -> Any:
    """The JSON of SDK objects (models, lists and dicts of them) as the server sent it."""
    if isinstance(value, ApiModel):
        return value.raw()
    if isinstance(value, Mapping):
        return {key: raw(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [raw(item) for item in value]
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(raw(value), indent=2, ensure_ascii=False) + "\n")


def read_secret(prompt: str, *, confirm: bool = False) -> str:
    """A password: asked with hidden input on a terminal, else one line of standard input
    (so scripts can pipe it instead of putting it on the command line)."""
    if sys.stdin.isatty():
        try:
            value: str = typer.prompt(prompt, hide_input=True, confirmation_prompt=confirm)
        except typer.Abort:
            raise KeyboardInterrupt from None  # Ctrl-C or Ctrl-D at the prompt: exit code 130
        return value
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise InvalidArgumentError(f"{prompt.lower()}: none given on standard input")
    return line


def key_values(pairs: Sequence[str], option: str) -> dict[str, str]:
    """`["a=1", "b=x=y"]` → `{"a": "1", "b": "x=y"}`; a pair without `=` is a usage error."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise InvalidArgumentError(f"{option} {pair!r}: expected KEY=VALUE")
        result[key] = value
    return result


def comma_list(values: Sequence[str] | None) -> list[str]:
    """Values of a repeatable option that also takes comma-separated lists."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]
