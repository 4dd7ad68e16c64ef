"""Fixtures of the portal tests: the whole platform (API, portal, controller, local executor on
the four-node example cluster, SQLite) once per test module, and Debian's Chromium driven by
Playwright, one browser per test module and a fresh context (cookies, viewport) per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from browsing import CHROMIUM_ARGS, DESKTOP
from playwright.sync_api import Browser, Page, sync_playwright

from server.harness import RunningServer, serve_platform, server_settings


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The platform serving the portal, shared by the tests of one module."""
    with serve_platform(server_settings(tmp_path_factory.mktemp("portal-home"))) as server:
        yield server


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Browser]:
    """Per module, not per session: while Playwright's synchronous API is started, its event
    loop counts as running in this thread, and the `asyncio.run` of a test that a worker runs
    after a portal test's module (tests/server/test_intake.py) would fail."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, portal: RunningServer) -> Iterator[Page]:
    """A new browser tab with no cookies, at the desktop size, rooted at the portal."""
    context = browser.new_context(base_url=portal.base_url, viewport=DESKTOP)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()
