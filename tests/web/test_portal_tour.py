"""Every main page of the portal on a cluster with work on it, at a desktop and at a phone
size: each shows what it is for, and none makes the page scroll sideways on the phone.

The screenshots land in test-artifacts/screenshots; with PAI_UPDATE_PORTAL_SCREENSHOTS=1 the
ones the portal's documentation shows are copied to docs/images/portal as well.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from browsing import log_in, screenshots, type_job
from playwright.sync_api import Page, expect

from server.harness import RunningServer
from server.jobapi import job_yaml, submit, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EXAMPLES = Path(__file__).parents[2] / "examples" / "jobs"
ALICE, ALICE_PASSWORD = "alice", "alice-password"
TRAINING = """import time
for epoch in range(1, 600):
    print(f"epoch {epoch:3d}  loss {2.0 / epoch:.4f}  accuracy {1 - 0.5 / epoch:.3f}", flush=True)
    time.sleep(0.5)
"""
FAILING = """import sys
print("loading /data/imagenet/train.csv", flush=True)
sys.exit("FileNotFoundError: /data/imagenet/train.csv")
"""


@pytest.fixture(scope="module")
def jobs(portal: RunningServer) -> Iterator[dict[str, str]]:
    """Alice's jobs in every state: succeeded, failed, running, and waiting for her VC."""
    with portal.client(portal.admin_token()) as admin:
        group = {
            "groupname": "research_team",
            "description": "People running experiments",
            "extension": {"acls": {"virtualClusters": ["research"]}},
        }
        assert admin.post("/groups", json=group).status_code == 201
        portal.create_user(ALICE, password=ALICE_PASSWORD)
        grouplist = {"grouplist": ["default", "research_team"]}
        assert admin.put(f"/users/{ALICE}/grouplist", json=grouplist).status_code == 201
    with portal.client(portal.login(ALICE, ALICE_PASSWORD)) as alice:
        names = {
            "hello": submit(alice, (EXAMPLES / "hello-world.yaml").read_text()),
            "failed": submit(alice, job_yaml("prepare-data", [_python(FAILING)])),
            "running": submit(alice, job_yaml("train-resnet", [_python(TRAINING)], instances=2)),
            "sweep": submit(
                alice, job_yaml("sweep-large", ["sleep 600"], vc="research", instances=4)
            ),
            "waiting": submit(alice, job_yaml("sweep-small", ["sleep 60"], vc="research")),
        }
        alice.put(f"/jobs/{names['hello']}/tag", json={"value": "baseline"})
        wait_for(alice, names["hello"])
        wait_for(alice, names["failed"])
        wait_for(alice, names["running"], {"RUNNING"})
        wait_for(alice, names["sweep"], {"RUNNING"})
        waiting = wait_for(alice, names["waiting"], {"WAITING"})
        assert waiting["jobStatus"]["waitReason"] is not None
        yield names


def test_the_pages_of_a_user(page: Page, portal: RunningServer, jobs: dict[str, str]) -> None:
    page.goto("/login")
    screenshots(page, "login")
    log_in(page, ALICE, ALICE_PASSWORD)
    expect(page.get_by_role("region", name="My recent jobs")).to_contain_text("train-resnet")
    expect(page.get_by_role("region", name="My virtual clusters")).to_contain_text("research")
    screenshots(page, "home", for_docs=("desktop", "phone"))

    page.goto("/jobs")
    expect(page.locator("#job-table tbody tr")).to_have_count(5)
    screenshots(page, "jobs", for_docs=("desktop", "phone"))

    page.goto(f"/jobs/{jobs['running']}")
    expect(page.locator("#log-view")).to_contain_text("epoch   2")
    screenshots(page, "job", for_docs=("desktop", "phone"))

    page.goto(f"/jobs/{jobs['failed']}")
    expect(page.get_by_role("heading", name=re.compile("Why it ended"))).to_be_visible()
    expect(page.locator("#log-view")).to_contain_text("FileNotFoundError")
    screenshots(page, "job-failed")

    page.goto(f"/jobs/{jobs['waiting']}")
    expect(page.get_by_role("heading", name="Why it is waiting")).to_be_visible()
    screenshots(page, "job-waiting")

    page.goto("/submit?example=parameters-secrets-deployment")
    expect(page.get_by_role("group", name="Parameters").get_by_label("epochs")).to_have_value("3")
    expect(page.locator("#job-check")).to_contain_text("is valid")
    screenshots(page, "submit")
    text = page.get_by_label("Job YAML").input_value()
    type_job(
        page,
        text.replace("dockerImage: python", "dockerImage: pyton").replace("cpu: 1", "cpu: one"),
    )
    expect(page.locator("#job-check")).to_contain_text("2 problems")
    page.locator("#job-check [data-goto-line]").first.click()
    expect(page.locator(".editor-backdrop .line.error").first).to_be_in_viewport()
    screenshots(page, "submit-problems")

    page.goto("/virtual-clusters")
    research = page.get_by_role("region", name="research")
    expect(research).to_contain_text("4 of 4 guaranteed CPU slots used")
    expect(research.get_by_role("region", name="Waiting")).to_contain_text("sweep-small")
    screenshots(page, "virtual-clusters")

    page.goto("/account")
    page.get_by_role("button", name="New application token").click()
    expect(page.get_by_role("heading", name="Your new application token")).to_be_visible()
    screenshots(page, "account", for_docs=())


def test_the_pages_of_an_administrator(
    page: Page, portal: RunningServer, jobs: dict[str, str]
) -> None:
    log_in(page, portal.admin.username, portal.admin.password)
    page.goto("/cluster")
    nodes = page.get_by_role("region", name="Nodes")
    expect(nodes.locator("tbody tr")).to_have_count(4)
    expect(nodes).to_contain_text("train-resnet")
    screenshots(page, "cluster")

    page.goto("/admin/users")
    expect(page.get_by_role("row", name=re.compile(f"^{ALICE}"))).to_contain_text("research_team")
    screenshots(page, "admin-users")
    page.get_by_role("link", name=ALICE, exact=True).click()
    expect(page.get_by_role("checkbox", name=re.compile("research_team"))).to_be_checked()
    screenshots(page, "admin-user", for_docs=())

    page.goto("/admin/groups")
    expect(page.get_by_role("row", name=re.compile("^research_team"))).to_contain_text(ALICE)
    screenshots(page, "admin-groups")
    page.get_by_role("link", name="research_team").click()
    expect(page.get_by_role("checkbox", name="research")).to_be_checked()
    screenshots(page, "admin-group", for_docs=())


def _python(script: str) -> str:
    """A command running `script` with Python."""
    return f"python3 -c {shlex.quote(script)}"
