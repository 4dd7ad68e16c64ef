"""`pai login`, `logout`, `whoami` and failures, run as a user runs them."""

from __future__ import annotations

import json
import socket
import stat

from pai_runner import Pai, single_error

from pai.sdk.config import ClientConfig, Credentials, save_config
from server.harness import Account, RunningServer


def saved(pai: Pai) -> dict[str, dict[str, str]]:
    servers: dict[str, dict[str, str]] = json.loads(pai.config.read_text())["servers"]
    return servers


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_login_asks_for_the_password_and_keeps_the_token_private(
    pai: Pai, pai_server: RunningServer
) -> None:
    alice = Account.create(pai_server)

    result = pai.run(
        "login",
        "--server",
        pai_server.base_url,
        "--username",
        alice.username,
        input=f"{alice.password}\n",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Logged in to {pai_server.base_url} as {alice.username} (user).\n"
    assert stat.S_IMODE(pai.config.stat().st_mode) == 0o600
    token = saved(pai)[pai_server.base_url]["token"]
    assert token not in result.stdout + result.stderr
    with pai_server.client(token) as client:
        assert client.get("/tokens/check").json()["username"] == alice.username


def test_login_takes_the_password_as_an_option(pai: Pai, pai_server: RunningServer) -> None:
    alice = Account.create(pai_server)

    pai.login(pai_server, alice.username, alice.password)
    result = pai.run("whoami")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{alice.username} (user) on {pai_server.base_url}")
    assert json.loads(pai.run("whoami", "--json").stdout)["username"] == alice.username


def test_a_wrong_password_is_one_line_and_saves_nothing(
    pai: Pai, pai_server: RunningServer
) -> None:
    alice = Account.create(pai_server)

    result = pai.run(
        "login", "--server", pai_server.base_url, "-u", alice.username, "--password", "wrong!"
    )

    assert single_error(result) == "error: the password is incorrect (IncorrectPasswordError)"
    assert not pai.config.exists()


def test_a_server_that_is_down_is_one_line(pai: Pai) -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    result = pai.run("login", "--server", url, "-u", "alice", "--password", "secret")

    assert (
        single_error(result) == f"error: cannot reach the PAI server at {url}: connection refused"
    )


def logged_in_to_a_server_that_is_down(pai: Pai) -> str:
    """The URL of a server `pai` holds a token for, where nothing listens."""
    url = f"http://127.0.0.1:{closed_port()}"
    save_config(ClientConfig().with_login(url, Credentials("alice", "token")), pai.config)
    return url


def test_a_server_that_does_not_answer_is_waited_for_and_the_wait_is_said(pai: Pai) -> None:
    url = logged_in_to_a_server_that_is_down(pai)

    result = pai.run("jobs", PAI_RETRY_SECONDS="1")

    refused = f"cannot reach the PAI server at {url}: connection refused"
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{refused}; trying again for up to 1 s (Ctrl-C stops)",
        f"error: {refused}",
    ]


def test_pai_retry_seconds_zero_fails_at_once_and_nonsense_is_refused(pai: Pai) -> None:
    url = logged_in_to_a_server_that_is_down(pai)

    at_once = pai.run("jobs", PAI_RETRY_SECONDS="0")
    nonsense = pai.run("jobs", PAI_RETRY_SECONDS="soon")

    assert (
        single_error(at_once) == f"error: cannot reach the PAI server at {url}: connection refused"
    )
    assert single_error(nonsense) == (
        "error: PAI_RETRY_SECONDS must be a number of seconds (0 or more), not 'soon'"
    )


def test_commands_before_login_say_how_to_log_in(pai: Pai, pai_server: RunningServer) -> None:
    result = pai.run("jobs", "--server", pai_server.base_url)

    assert single_error(result) == (
        f"error: not logged in to {pai_server.base_url}: "
        f"run `pai login --server {pai_server.base_url} --username NAME`"
    )


def test_pai_server_overrides_the_saved_server_without_sending_it_the_token(
    pai: Pai, pai_server: RunningServer
) -> None:
    alice = Account.create(pai_server)
    pai.login(pai_server, alice.username, alice.password)
    elsewhere = f"http://127.0.0.1:{closed_port()}"

    result = pai.run("whoami", PAI_SERVER=elsewhere)

    assert single_error(result).startswith(f"error: not logged in to {elsewhere}")


def test_logout_revokes_and_forgets_the_token(pai: Pai, pai_server: RunningServer) -> None:
    alice = Account.create(pai_server)
    pai.login(pai_server, alice.username, alice.password)
    token = saved(pai)[pai_server.base_url]["token"]

    result = pai.run("logout")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Logged out of {pai_server.base_url}.\n"
    assert saved(pai) == {}
    with pai_server.client(token) as client:
        assert client.get("/tokens/check").status_code == 401


def test_an_expired_or_revoked_token_says_to_log_in_again(
    pai: Pai, pai_server: RunningServer
) -> None:
    alice = Account.create(pai_server)
    pai.login(pai_server, alice.username, alice.password)
    with pai_server.client(saved(pai)[pai_server.base_url]["token"]) as client:
        client.delete("/authn/basic/logout")

    line = single_error(pai.run("whoami"))

    assert "(UnauthorizedUserError)" in line
    assert line.endswith("log in again with `pai login`")
