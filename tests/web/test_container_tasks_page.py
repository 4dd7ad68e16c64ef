"""A job's page when its tasks run in containers, in a real browser: the wait for an image
shows on the task while it is pulled, and a task that ran says it ran in its image."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browsing import log_in, type_job
from playwright.sync_api import Locator, Page, expect

from e2e.test_container_jobs import in_image
from pai.executors.sandboxes.containers import ContainerSandbox
from server.harness import Credentials, RunningServer, serve_platform, server_settings
from server.jobapi import job_yaml

pytestmark = [pytest.mark.browser, pytest.mark.slow]
JOB_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def portal(
    tmp_path_factory: pytest.TempPathFactory, container_sandbox: ContainerSandbox
) -> Iterator[RunningServer]:
    """The platform with container tasks, in the test registry's runtime configuration."""
    settings = server_settings(tmp_path_factory.mktemp("portal-home"), isolation="container")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in container_sandbox.env.items():
            patch.setenv(name, value)
        with serve_platform(settings) as server:
            yield server


@pytest.fixture
def user(portal: RunningServer) -> Credentials:
    return portal.create_user()


def task_row(page: Page) -> Locator:
    tasks = page.get_by_role("region", name="Tasks")
    return tasks.get_by_role("row", name=re.compile("^main #0"))


def test_a_task_waiting_for_its_image_says_so_on_its_row(page: Page, user: Credentials) -> None:
    unreachable = "127.0.0.1:9/team/trainer:7"  # nothing answers: the pull is retried
    job = job_yaml("waits-for-image", ["echo never"]).replace("python:3.11", unreachable)
    log_in(page, user.username, user.password)
    page.goto("/submit")
    type_job(page, job)
    page.get_by_role("button", name="Submit job").click()

    expect(task_row(page)).to_contain_text(f"pulling image {unreachable}", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#job-status")).to_contain_text(f"task main-0: pulling image {unreachable}")


def test_a_task_that_ran_in_its_image_says_so(
    page: Page, user: Credentials, container_sandbox: ContainerSandbox, busybox_image: str
) -> None:
    job = in_image(
        job_yaml("in-image", ["echo from the image"]), busybox_image, container_sandbox.password
    )
    log_in(page, user.username, user.password)
    page.goto("/submit")
    type_job(page, job)
    page.get_by_role("button", name="Submit job").click()

    heading = page.get_by_role("heading", level=1).locator(".badge")
    expect(heading).to_have_text("SUCCEEDED", timeout=JOB_TIMEOUT_MS)
    expect(task_row(page)).to_contain_text("in a container of its image")
    expect(page.locator("#log-view")).to_contain_text("from the image")
