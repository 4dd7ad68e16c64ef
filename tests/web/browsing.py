"""What the portal tests do in the browser again and again: log in, type a job, take
screenshots at a desktop and a phone size."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.sync_api import Page, ViewportSize, expect

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}

ROOT = Path(__file__).parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DOC_IMAGES = ROOT / "docs" / "images" / "portal"
UPDATE_DOC_IMAGES = os.environ.get("PAI_UPDATE_PORTAL_SCREENSHOTS") == "1"
"""Set to 1 to copy the screenshots the portal documentation shows into docs/images/portal."""

LOG_IN_TIMEOUT_MS = 15_000


def log_in(page: Page, username: str, password: str) -> None:
    """Log in through the form and land on the home page."""
    page.goto("/login")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name=f"Hello, {username}")).to_be_visible(
        timeout=LOG_IN_TIMEOUT_MS
    )


def type_job(page: Page, text: str) -> None:
    """Replace the editor's text, as a user pasting a job would."""
    page.get_by_label("Job YAML").fill(text)


def screenshots(page: Page, name: str, *, for_docs: tuple[str, ...] = ("desktop",)) -> None:
    """Save the page at the desktop and the phone size (whole pages), and check that at the
    phone size nothing makes the page itself scroll sideways (wide tables scroll inside
    their box). `for_docs` names the sizes copied to the documentation's images."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size_name, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        path = SCREENSHOTS / f"{name}-{size_name}.png"
        page.screenshot(path=path, full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} scrolls sideways by {overflow} px at {size_name} size"
        if UPDATE_DOC_IMAGES and size_name in for_docs:
            DOC_IMAGES.mkdir(parents=True, exist_ok=True)
            suffix = "" if size_name == "desktop" else f"-{size_name}"
            shutil.copyfile(path, DOC_IMAGES / f"{name}{suffix}.png")
    page.set_viewport_size(DESKTOP)
