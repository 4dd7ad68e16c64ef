"""`pai token`: your tokens, and application tokens for scripts."""

from __future__ import annotations

import hashlib
from typing import Annotated

import typer
from rich.text import Text

from pai.cli.formatting import table, timestamp
from pai.cli.session import JsonOption, ServerOption, connect, err, out, print_json

token_app = typer.Typer(name="token", help="Your tokens.", no_args_is_help=True)


@token_app.command("list")
def list_tokens(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """List your live tokens (by hash: PAI never stores a token in clear)."""
    with connect(server) as client:
        tokens = client.tokens()
        current = hashlib.sha256((client.token or "").encode()).hexdigest()
    if as_json:
        print_json(tokens)
        return
    result = table("TOKEN HASH", "KIND", "CREATED", "EXPIRES", "LAST USED", "")
    for token in tokens:
        result.add_row(
            token.token_hash,
            "application" if token.application else "user",
            timestamp(token.created_time),
            "never" if token.expire_time is None else timestamp(token.expire_time),
            timestamp(token.last_used_time),
            Text("this session", "bold") if token.token_hash == current else "",
        )
    out().print(result)


@token_app.command("create-app")
def create_application_token(server: ServerOption = None) -> None:
    """Create an application token (never expires) and print it, for scripts and tools.

    Only the token goes to standard output: TOKEN=$(pai token create-app).
    """
    with connect(server) as client:
        token = client.create_application_token()
    typer.echo(token)  # unwrapped, whatever the width
    err().print(
        "This is the only time the token is shown; revoke it with `pai token revoke`.",
        style="dim",
    )


@token_app.command("revoke")
def revoke_token(
    token: Annotated[str, typer.Argument(help="The token, or its hash from `pai token list`.")],
    server: ServerOption = None,
) -> None:
    """Revoke one of your tokens."""
    with connect(server) as client:
        out().print(client.revoke_token(token))
