"""The portal shows shared GPUs: the cluster page draws how full each is and lists the tasks
sharing it, and a job's page tells the share each task has. A platform on the one-GPU example
cluster (examples/clusters/gpu-share.yaml), in Debian's Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browsing import log_in, screenshots
from playwright.sync_api import Page, expect

from server.harness import RunningServer, serve_platform, server_settings
from server.jobapi import submit, wait_for

EXAMPLES = Path(__file__).parents[2] / "examples"
SHARE_JOB = (EXAMPLES / "jobs" / "gpu-share.yaml").read_text() + "      - sleep 120\n"


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("shared-gpu-portal")
    cluster = EXAMPLES / "clusters" / "gpu-share.yaml"
    with serve_platform(server_settings(home), cluster) as server:
        yield server


@pytest.fixture(scope="module")
def sharing(portal: RunningServer) -> Iterator[list[str]]:
    """A quarter and a half of the GPU, both running."""
    with portal.client(portal.admin_token()) as admin:
        names = [
            submit(admin, SHARE_JOB.replace("name: gpu-share", "name: notebook")),
            submit(
                admin,
                SHARE_JOB.replace("name: gpu-share", "name: inference").replace(
                    "gpu: 0.25", "gpu: 0.5"
                ),
            ),
        ]
        for name in names:
            wait_for(admin, name, {"RUNNING"}, timeout=90)
        yield names
        for name in names:
            admin.put(f"/jobs/{name}/executionType", json={"value": "STOP"})


def test_the_cluster_page_shows_who_shares_the_gpu_and_what_is_left(
    page: Page, portal: RunningServer, sharing: list[str]
) -> None:
    log_in(page, portal.admin.username, portal.admin.password)
    page.goto("/cluster")

    cell = page.get_by_role("list", name="Cells of gpu-node").get_by_role("listitem")
    expect(cell).to_have_attribute("class", re.compile(r"\bshared-8\b"))  # 0.75 taken
    expect(cell).to_have_attribute("title", re.compile("shared by .*notebook.*; 0.25 free"))
    shared = page.get_by_role("region", name="Shared GPUs")
    row = shared.get_by_role("row", name=re.compile("^gpu-node"))
    expect(row).to_contain_text("0.25")
    expect(row).to_contain_text("notebook main #0")
    expect(row).to_contain_text("0.25 of the GPU · 4096 MB of its memory")
    expect(row).to_contain_text("inference main #0")
    expect(row).to_contain_text("0.5 of the GPU")
    expect(page.get_by_role("region", name="Nodes")).to_contain_text("shares a GPU")
    screenshots(page, "cluster-shared-gpus", for_docs=())


def test_a_jobs_page_tells_the_share_of_its_gpu_each_task_has(
    page: Page, portal: RunningServer, sharing: list[str]
) -> None:
    log_in(page, portal.admin.username, portal.admin.password)
    page.goto(f"/jobs/{sharing[1]}")

    tasks = page.get_by_role("region", name="Tasks")
    row = tasks.get_by_role("row", name=re.compile("^main #0 RUNNING"))
    expect(row).to_contain_text("0 0.5 of it")
