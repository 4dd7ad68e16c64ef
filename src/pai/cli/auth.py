"""`pai login`, `pai logout`, `pai whoami`: the saved server and token."""

from __future__ import annotations

import webbrowser
from typing import Annotated

import typer

from pai.cli.formatting import timestamp
from pai.cli.session import JsonOption, ServerOption, connect, err, out, print_json, read_secret
from pai.sdk import (
    Client,
    ConfigError,
    InvalidArgumentError,
    LoginResult,
    PaiError,
    UnauthorizedError,
    log_in,
)
from pai.sdk.config import Credentials, config_path, load_config, normalize_server, save_config
from pai.sdk.signin import authn_info, sign_in_through_provider


def login(
    username: Annotated[
        str | None,
        typer.Option(
            "--username",
            "-u",
            help="Your user name. Leave it out where the cluster signs in through an "
            "OpenID Connect provider: your browser opens the provider's page.",
        ),
    ] = None,
    server: ServerOption = None,
    password: Annotated[
        str | None,
        typer.Option(
            "--password",
            help="Your password; asked with hidden input when not given (or read from "
            "standard input when it is not a terminal).",
        ),
    ] = None,
    expiration: Annotated[
        int | None,
        typer.Option(help="Lifetime of the token in seconds (the server's default: a day)."),
    ] = None,
    browser: Annotated[
        bool,
        typer.Option(
            "--browser/--no-browser",
            help="Open the provider's sign-in page in a browser, or only print its address.",
        ),
    ] = True,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for the sign-in in the browser.")
    ] = 300.0,
) -> None:
    """Log in and save the server and a token in ~/.pai/config (or $PAI_CONFIG), mode 600.

    With a user name, the password is checked by the cluster (or its LDAP directory). Where
    the cluster signs in through an OpenID Connect provider, leave the user name out: the
    provider's page opens in your browser (or its address is printed), and this command waits
    until you have signed in there. The token is never printed. Later commands use this server
    unless --server says otherwise.
    """
    path = config_path()
    config = load_config(path)
    url = server or config.server
    if not url:
        raise ConfigError("which server? pass --server URL (or set PAI_SERVER)")
    if username is None:
        result = _sign_in_with_browser(url, expiration, browser=browser, wait=wait)
    else:
        secret = password if password is not None else read_secret("Password")
        result = log_in(url, username, secret, expiration)
    save_config(config.with_login(url, Credentials(result.user, result.token)), path)
    role = "administrator" if result.admin else "user"
    out().print(f"Logged in to {normalize_server(url)} as {result.user} ({role}).")


def _sign_in_with_browser(
    server: str, expiration: int | None, *, browser: bool, wait: float
) -> LoginResult:
    """The sign-in through the cluster's provider (`pai.sdk.signin`)."""
    info = authn_info(server)
    if info.mode != "oidc":
        raise InvalidArgumentError(
            f"{normalize_server(server)} logs in with a user name and password: "
            "pass --username NAME"
        )

    def show(address: str) -> None:
        opened = False
        if browser:
            opened = webbrowser.open(address)
        how = "A browser opens" if opened else "Open this address in a browser"
        err().print(f"{how} to sign in with {info.provider}:")
        err().print(address, soft_wrap=True, markup=False)  # one line, to copy whole
        err().print("Waiting for the sign-in (Ctrl-C to stop)...")

    return sign_in_through_provider(server, show, expiration=expiration, wait=wait)


def logout(server: ServerOption = None) -> None:
    """Revoke the saved token on the server and forget it."""
    path = config_path()
    config = load_config(path)
    client = Client.from_config(path, server=server)
    with client:
        if client.token is None:
            out().print(f"Not logged in to {client.server}.")
            return
        try:
            client.logout()
        except UnauthorizedError:
            pass  # the token was already revoked or expired: forgetting it is all that is left
        except PaiError as error:
            err().print(f"warning: could not revoke the token on the server: {error}")
        save_config(config.without(client.server), path)
        out().print(f"Logged out of {client.server}.")


def whoami(server: ServerOption = None, as_json: JsonOption = False) -> None:
    """Show who you are logged in as, and until when."""
    with connect(server) as client:
        who = client.whoami()
        if as_json:
            print_json(who)
            return
        role = "administrator" if who.admin else "user"
        kind = "application token" if who.application else "user token"
        expires = "never expires" if who.exp is None else f"expires {timestamp(who.exp * 1000)}"
        out().print(f"{who.username} ({role}) on {client.server}, {kind}, {expires}")
