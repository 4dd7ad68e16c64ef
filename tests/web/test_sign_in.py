"""Signing in to the portal in Chromium with the organisation's accounts: "Sign in with
<provider>" through a real OpenID Connect provider, and the LDAP directory's passwords."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browsing import CHROMIUM_ARGS, DESKTOP, screenshots
from playwright.sync_api import Browser, Page, expect, sync_playwright

from pai.authn_settings import AuthnSettings
from providers.oidc import OidcProvider
from providers.slapd import Slapd, password_of
from server.directory_groups import directory_group, start_oidc_pai, user_view
from server.harness import RunningServer, server_settings

pytestmark = pytest.mark.browser
StartPlatform = Callable[..., RunningServer]


@pytest.fixture
def browser(chromium_path: str) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def portal_page(browser: Browser, portal: RunningServer) -> Page:
    context = browser.new_context(base_url=portal.base_url, viewport=DESKTOP)
    context.set_default_timeout(20_000)
    return context.new_page()


@pytest.fixture
def oidc_portal(
    oidc_provider: OidcProvider,
    start_pai_platform: StartPlatform,
    pai_database_url: str,
    tmp_path: Path,
) -> RunningServer:
    return start_oidc_pai(
        start_pai_platform, oidc_provider, tmp_path / "pai-home", pai_database_url
    )


def sign_in_with_provider(page: Page, name: str, password: str) -> None:
    page.goto("/jobs")
    page.get_by_role("link", name="Sign in with Example Identity").click()
    page.get_by_label("Account").fill(name)
    page.get_by_label("Secret").fill(password)
    page.get_by_role("button", name="Continue").click()


def test_sign_in_with_the_provider_lands_on_the_page_asked_for(
    browser: Browser, oidc_portal: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("alice", "alice-pass", "vision")
    page = portal_page(browser, oidc_portal)

    page.goto("/login")
    screenshots(page, "login-oidc")
    sign_in_with_provider(page, "alice", "alice-pass")

    expect(page).to_have_url(f"{oidc_portal.base_url}/jobs")
    expect(page.get_by_role("link", name="alice")).to_be_visible()
    assert user_view(oidc_portal, "alice")["virtualCluster"] == ["default", "vision"]


def test_a_forged_id_token_leaves_the_visitor_at_the_login_page_with_the_reason(
    browser: Browser, oidc_portal: RunningServer, oidc_provider: OidcProvider
) -> None:
    oidc_provider.person("bob", "bob-pass", "vision")
    oidc_provider.tamper("forged")
    page = portal_page(browser, oidc_portal)

    sign_in_with_provider(page, "bob", "bob-pass")

    expect(page.get_by_role("alert")).to_contain_text("it was forged or altered on the way")
    assert "pai_session" not in {cookie["name"] for cookie in page.context.cookies()}


def test_the_local_administrator_logs_in_with_a_password_beside_the_provider(
    browser: Browser, oidc_portal: RunningServer
) -> None:
    page = portal_page(browser, oidc_portal)
    page.goto("/login")
    page.get_by_text("Local administrator").click()
    page.get_by_label("User name").fill(oidc_portal.admin.username)
    page.get_by_label("Password").fill(oidc_portal.admin.password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Hello, admin")).to_be_visible()


def test_ldap_users_log_in_with_the_directorys_password(
    browser: Browser,
    ldap_directory: Slapd,
    start_pai_platform: StartPlatform,
    pai_database_url: str,
    tmp_path: Path,
) -> None:
    settings = server_settings(
        tmp_path / "pai-home",
        pai_database_url,
        authn=AuthnSettings.from_env(ldap_directory.settings_env()),
    )
    portal = start_pai_platform(settings)
    directory_group(portal, "vision_team", "vision", "vision")
    page = portal_page(browser, portal)

    page.goto("/login")
    expect(page.get_by_text("Use your organisation account.")).to_be_visible()
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill(password_of("alice"))
    page.get_by_role("button", name="Log in").click()

    expect(page.get_by_role("heading", name="Hello, alice")).to_be_visible()
    assert user_view(portal, "alice")["virtualCluster"] == ["default", "vision"]
