"""What users do in the portal, in a real browser against the whole platform: log in, submit
a job from the editor and watch it succeed, read its log, see a broken job marked at its line,
stop a running job, and an administrator adding a user who cannot administer."""

from __future__ import annotations

import re
import uuid

import pytest
from browsing import log_in, type_job
from playwright.sync_api import Locator, Page, expect

from server.harness import Credentials, RunningServer
from server.jobapi import job_yaml

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOB_TIMEOUT_MS = 60_000


@pytest.fixture
def user(portal: RunningServer) -> Credentials:
    """A new user of the `default` VC, created by the administrator."""
    return portal.create_user()


def job_state(page: Page) -> Locator:
    """The state badge in the job page's heading."""
    return page.get_by_role("heading", level=1).locator(".badge")


def test_a_visitor_logs_in_after_being_told_the_password_was_wrong(
    page: Page, portal: RunningServer
) -> None:
    page.goto("/jobs")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fjobs$"))
    page.get_by_label("User name").fill(portal.admin.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong user name or password.")
    page.get_by_label("Password").fill(portal.admin.password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/jobs$"))
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()


def test_a_job_submitted_from_the_editor_succeeds_and_its_log_can_be_read(
    page: Page, user: Credentials
) -> None:
    log_in(page, user.username, user.password)
    page.get_by_role("link", name="Submit", exact=True).click()
    expect(page.get_by_label("Job YAML")).to_have_value(re.compile(r"name: hello-world"))
    expect(page.locator("#job-check")).to_contain_text("Job 'hello-world' is valid")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(rf"/jobs/{user.username}~hello-world$"))
    expect(page.get_by_role("status").first).to_contain_text("is submitted")
    expect(job_state(page)).to_have_text("SUCCEEDED", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#log-view")).to_contain_text("Hello from task main/0")
    expect(page.locator("#log-view")).to_contain_text("Python 3.")
    task = page.get_by_role("region", name="Tasks").get_by_role("row", name=re.compile("^main #0"))
    expect(task).to_contain_text("Succeeded")
    expect(task).to_contain_text("on the host, not in its image")  # no container runtime here


def test_a_broken_job_is_marked_at_its_line_before_it_is_submitted(
    page: Page, user: Credentials, portal: RunningServer
) -> None:
    log_in(page, user.username, user.password)
    page.goto("/submit")
    valid = page.get_by_label("Job YAML").input_value()
    broken = valid.replace("memoryMB: 512", "memoryMB: plenty")
    line = broken.splitlines().index("      memoryMB: plenty") + 1
    type_job(page, broken)

    gutter_line = page.locator(".editor-gutter > div").nth(line - 1)
    expect(gutter_line).to_have_class("error")
    expect(gutter_line).to_have_attribute("title", re.compile("memoryMB"))
    expect(page.locator(".editor-backdrop .line.error")).to_have_count(1)
    expect(page.locator(".editor-backdrop .line").nth(line - 1)).to_contain_text("memoryMB")
    expect(page.locator("#job-check")).to_contain_text(f"line {line}")

    page.get_by_role("button", name="Submit job").click()  # the server refuses it too
    expect(page.locator("#job-check")).to_contain_text(f"line {line}")
    with portal.client(portal.login(user.username, user.password)) as api:
        assert api.get("/jobs", params={"username": user.username}).json() == []


def test_a_running_job_is_stopped_from_its_page(page: Page, user: Credentials) -> None:
    name = f"sleeper-{uuid.uuid4().hex[:6]}"
    log_in(page, user.username, user.password)
    page.goto("/submit")
    type_job(page, job_yaml(name, ["echo about to sleep", "sleep 300"]))
    page.get_by_role("button", name="Submit job").click()
    expect(job_state(page)).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#log-view")).to_contain_text("about to sleep")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop").click()
    expect(job_state(page)).to_have_text("STOPPED", timeout=JOB_TIMEOUT_MS)
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)


def test_an_administrator_adds_a_user_who_cannot_reach_administration(
    page: Page, portal: RunningServer
) -> None:
    username, password = f"newcomer_{uuid.uuid4().hex[:6]}", "newcomer-password"
    log_in(page, portal.admin.username, portal.admin.password)
    page.get_by_role("link", name="Administration").click()
    form = page.locator("form", has=page.get_by_role("button", name="Create user"))
    form.get_by_label("User name").fill(username)
    form.get_by_label("Password").fill(password)
    form.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("status")).to_have_text(f"User {username} is created.")
    expect(page.get_by_role("row", name=re.compile(username))).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("status")).to_have_text("You are logged out.")
    log_in(page, username, password)
    navigation = page.get_by_role("navigation", name="Main")
    expect(navigation.get_by_role("link", name="Jobs")).to_be_visible()
    expect(navigation.get_by_role("link", name="Administration")).to_have_count(0)
    expect(navigation.get_by_role("link", name="Cluster", exact=True)).to_have_count(0)
    for path in ("/admin/users", "/admin/groups", "/cluster"):
        response = page.goto(path)
        assert response is not None and response.status == 403
        expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
