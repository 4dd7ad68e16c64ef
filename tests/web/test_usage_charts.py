"""The job page's charts of what each task uses, in the real browser, on a platform that
samples every half second; and the CLI's table of the same."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browsing import log_in, screenshots
from playwright.sync_api import Page, expect

from server.harness import RunningServer, serve_platform, server_settings
from server.jobapi import job_yaml, submit, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WORK = "python3 -c 'import time\nblob = bytearray(80 * 2**20)\nwhile True: pass'"


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("usage-home")
    with serve_platform(server_settings(home, monitor_interval=0.5)) as server:
        yield server


def test_the_job_page_charts_each_tasks_cpu_and_memory(page: Page, portal: RunningServer) -> None:
    with portal.client(portal.admin_token()) as admin:
        name = submit(admin, job_yaml("busy-pair", [WORK], instances=2))
        wait_for(admin, name, {"RUNNING"})
        log_in(page, portal.admin.username, portal.admin.password)

        page.goto(f"/jobs/{name}")
        usage = page.get_by_role("region", name="Resource use")
        cpu = usage.get_by_role("img", name=re.compile(r"^CPU: main.0: now"))
        expect(cpu).to_be_visible(timeout=30_000)  # the part refreshes itself as samples come
        expect(usage.get_by_role("img", name=re.compile(r"^Memory: main.0: now"))).to_be_visible()
        expect(usage.locator(".legend li")).to_have_count(4)  # two tasks in each chart
        expect(usage.locator("figure").first.locator("polyline")).to_have_count(2)
        page.wait_for_timeout(5000)  # ten more samples, for a chart worth looking at
        page.reload()
        label = cpu.get_attribute("aria-label") or ""
        screenshots(page, "job-usage", for_docs=("desktop",))
        admin.put(f"/jobs/{name}/executionType", json={"value": "STOP"})

    peaks = [float(value) for value in re.findall(r"peak ([\d.]+) % of a core", label)]
    assert len(peaks) == 2 and all(peak > 20 for peak in peaks), label
