"""The marketplace and the storage browser in a real browser against the whole platform.

One user publishes a job that finished; another finds it by searching, stars it, runs it from
the prefilled submit page with a parameter changed, and sees the new job succeed. A member of
a storage's group uploads, browses, downloads and deletes files in the portal.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from browsing import log_in, screenshots
from playwright.sync_api import Page, expect

from server.harness import Credentials, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for
from server.storagehelpers import define_storage, new_group, unique_storage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOB_TIMEOUT_MS = 60_000


def finished_job(portal: RunningServer, user: Credentials) -> str:
    """A job of `user` that declares a parameter and has succeeded."""
    text = job_yaml(
        unique("greeter"),
        ['echo "<% $parameters.greeting %> from the marketplace"'],
        top="parameters:\n  greeting: hello\nsecrets:\n  apiKey: not-for-sharing",
    )
    with portal.client(portal.login(user.username, user.password)) as client:
        name = submit(client, text)
        assert wait_for(client, name)["jobStatus"]["state"] == "SUCCEEDED"
    return name


def test_a_finished_job_is_published_found_starred_and_run_by_another_user(
    page: Page, portal: RunningServer
) -> None:
    author, runner = portal.create_user(), portal.create_user()
    job = finished_job(portal, author)
    title = f"Greeter {uuid.uuid4().hex[:6]}"

    log_in(page, author.username, author.password)
    page.goto(f"/jobs/{job}")
    page.get_by_role("link", name="Publish to marketplace").click()
    shared = page.get_by_role("region", name="What is shared")
    expect(shared).to_contain_text("apiKey: '******'")
    expect(shared).not_to_contain_text("not-for-sharing")
    page.get_by_label("Name").fill(title)
    page.get_by_label("Summary").fill("Greets whoever runs it")
    page.get_by_label("Description (Markdown)").fill(
        "Prints a **greeting**.\n\n- change `greeting`"
    )
    page.get_by_label("Tags (comma-separated)").fill("demo, greeting")
    screenshots(page, "marketplace-publish")
    confirmation = page.get_by_label("I checked the job on the right")
    expect(confirmation).to_have_attribute("required", "")
    confirmation.check()
    page.get_by_role("button", name="Publish").click()
    expect(page.get_by_role("heading", name=title, level=1)).to_be_visible()
    page.context.clear_cookies()

    log_in(page, runner.username, runner.password)
    page.get_by_role("link", name="Marketplace", exact=True).click()
    expect(page.get_by_role("link", name="hello-world")).to_be_visible()  # shipped examples
    page.get_by_label("Search").fill(title.split()[1])
    page.get_by_role("button", name="Search").click()
    results = page.locator(".market-card")
    expect(results).to_have_count(1)
    expect(results).to_contain_text("Greets whoever runs it")
    screenshots(page, "marketplace-browse")
    results.get_by_role("link", name=title).click()

    expect(page.locator(".markdown strong")).to_have_text("greeting")
    expect(page.locator(".markdown li")).to_contain_text("change greeting")
    page.get_by_role("button", name="Star", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text(f"You starred {title}")
    expect(page.locator("#star-count")).to_have_text("★ 1")
    expect(page.get_by_role("button", name="Unstar")).to_be_visible()
    screenshots(page, "marketplace-item")

    page.get_by_role("link", name="Run").click()
    expect(page.get_by_label("Job YAML")).to_have_value(re.compile(r"name: \"greeter-"))
    expect(page.locator("#job-check")).to_contain_text("apiKey")  # masked: to be typed again
    editor = page.get_by_label("Job YAML")
    editor.fill(editor.input_value().replace("'******'", "runners-own-key"))
    page.get_by_label("greeting").fill("bonjour")
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{runner.username}~greeter-"))
    expect(page.get_by_role("heading", level=1).locator(".badge")).to_have_text(
        "SUCCEEDED", timeout=JOB_TIMEOUT_MS
    )
    expect(page.locator("#log-view")).to_contain_text("bonjour from the marketplace")

    page.goto("/marketplace?starred=true")
    expect(page.locator(".market-card")).to_contain_text("run 1 time")


def test_a_member_uploads_browses_downloads_and_deletes_files(
    page: Page, portal: RunningServer, tmp_path: Path
) -> None:
    user = portal.create_user()
    root = tmp_path / "team"
    root.mkdir()
    (root / "datasets").mkdir()
    (root / "datasets" / "train.csv").write_text("x,y\n1,2\n")
    name = unique_storage("team")
    define_storage(portal, name, "directory", {"path": str(root)}, description="Team data")
    new_group(portal, [name], [user.username])
    upload = tmp_path / "notes.txt"
    upload.write_text("uploaded from the browser\n")

    log_in(page, user.username, user.password)
    page.get_by_role("link", name="Storage", exact=True).click()
    expect(page.get_by_role("row", name=re.compile(name))).to_contain_text("of")
    page.get_by_role("link", name=name).click()
    page.get_by_role("link", name="datasets/").click()
    expect(page.get_by_role("link", name="train.csv")).to_be_visible()
    page.get_by_label("Files", exact=True).set_input_files(str(upload))
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status").first).to_contain_text("Uploaded notes.txt")
    assert (root / "datasets" / "notes.txt").read_text() == "uploaded from the browser\n"
    page.get_by_label("Folder name").fill("results")
    page.get_by_role("button", name="Make folder").click()
    expect(page.get_by_role("link", name="results/")).to_be_visible()
    screenshots(page, "storage-browser")

    with page.expect_download() as download:
        page.get_by_role("link", name="train.csv").click()
    assert Path(download.value.path()).read_text() == "x,y\n1,2\n"

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete notes.txt").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted /datasets/notes.txt")
    assert not (root / "datasets" / "notes.txt").exists()
