"""`pai login` on a cluster that signs in through an OpenID Connect provider: the command
prints the sign-in address and waits; Chromium signs in at the provider (django-oidc-provider
on 127.0.0.1) and comes back to the command, which saves a token."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pai_runner import Pai
from playwright.sync_api import Browser, Page, sync_playwright

from providers.oidc import OidcProvider
from server.directory_groups import start_oidc_pai
from server.harness import RunningServer
from web.browsing import CHROMIUM_ARGS

pytestmark = pytest.mark.browser


@pytest.fixture
def cluster(
    oidc_provider: OidcProvider,
    start_pai_server: Callable[..., RunningServer],
    pai_database_url: str,
    tmp_path: Path,
) -> RunningServer:
    return start_oidc_pai(start_pai_server, oidc_provider, tmp_path / "pai-home", pai_database_url)


@pytest.fixture
def page(chromium_path: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser: Browser = playwright.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.set_default_timeout(20_000)
        yield page
        browser.close()


def sign_in_address(command: subprocess.Popen[str]) -> str:
    """The address `pai login` prints for the browser."""
    assert command.stderr is not None
    for line in command.stderr:
        if line.startswith("http"):
            return line.strip()
    raise AssertionError(f"pai login printed no address; it exited with {command.wait()}")


def sign_in_at_provider(page: Page, address: str, name: str, password: str) -> None:
    page.goto(address)
    page.get_by_label("Account").fill(name)
    page.get_by_label("Secret").fill(password)
    page.get_by_role("button", name="Continue").click()


def test_pai_login_signs_in_through_the_browser_and_saves_the_token(
    pai: Pai, cluster: RunningServer, oidc_provider: OidcProvider, page: Page
) -> None:
    oidc_provider.person("alice", "alice-pass", "vision")
    command = pai.start("login", "--server", cluster.base_url, "--no-browser")

    sign_in_at_provider(page, sign_in_address(command), "alice", "alice-pass")

    assert page.get_by_text("You are signed in to PAI.").is_visible()
    stdout, stderr = command.communicate(timeout=60)
    assert command.returncode == 0, stderr
    assert stdout == f"Logged in to {cluster.base_url} as alice (user).\n"
    token = json.loads(pai.config.read_text())["servers"][cluster.base_url]["token"]
    assert token not in stdout + stderr
    whoami = pai.run("whoami", "--json")
    assert json.loads(whoami.stdout)["username"] == "alice"


def test_pai_login_reports_a_refused_sign_in_and_saves_nothing(
    pai: Pai, cluster: RunningServer, oidc_provider: OidcProvider, page: Page
) -> None:
    oidc_provider.person("bob", "bob-pass", "vision")
    oidc_provider.tamper("forged")
    command = pai.start("login", "--server", cluster.base_url, "--no-browser")

    sign_in_at_provider(page, sign_in_address(command), "bob", "bob-pass")

    _, stderr = command.communicate(timeout=60)
    assert command.returncode == 1
    assert "sign-in refused" in stderr and "forged or altered" in stderr
    assert not pai.config.exists()


def test_pai_login_without_a_user_name_on_a_password_cluster_says_what_to_do(
    pai: Pai, pai_server: RunningServer
) -> None:
    result = pai.run("login", "--server", pai_server.base_url)
    assert result.returncode != 0
    assert "pass --username NAME" in result.stderr
