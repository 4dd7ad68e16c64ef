"""The portal's VC page shows each user's use against the limit, in a real browser against the
whole platform (the four-node CPU cluster, its `default` VC limiting each user to 2 CPUs and 1
running job)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browsing import log_in, screenshots
from playwright.sync_api import Page, expect

from server.harness import LOCAL_CLUSTER_FILE, RunningServer, serve_platform, server_settings
from server.jobapi import job_yaml, submit, unique, wait_for

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def portal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    home = tmp_path_factory.mktemp("limited-portal")
    cluster = Path(home) / "limited.yaml"
    cluster.write_text(
        LOCAL_CLUSTER_FILE.read_text().replace(
            "    - {cellType: CPU-NODE, cellNumber: 3}\n",
            "    - {cellType: CPU-NODE, cellNumber: 3}\n    userLimit: {cpus: 2, jobs: 1}\n",
        )
    )
    with serve_platform(server_settings(home / "home"), cluster) as server:
        yield server


def test_each_users_use_is_shown_against_the_limit(page: Page, portal: RunningServer) -> None:
    user = portal.create_user()
    with portal.client(portal.admin_token()) as admin:
        group = {"groupname": "power", "extension": {"acls": {"virtualClusters": ["default"]}}}
        assert admin.post("/groups", json=group).status_code == 201
        response = admin.put("/virtual-clusters/default/user-limits/power", json={"cpus": 4})
        assert response.status_code == 200, response.text
    with portal.client(portal.login(user.username, user.password)) as client:
        running = submit(client, job_yaml(unique("running"), ["sleep 300"]))
        wait_for(client, running, {"RUNNING"})
        submit(client, job_yaml(unique("held"), ["sleep 300"]))

    log_in(page, user.username, user.password)
    page.goto("/virtual-clusters")
    users = page.locator("#vc-default table.vc-users")
    row = users.locator(f"tr[data-user='{user.username}']")
    expect(row).to_be_visible()
    expect(row.get_by_role("cell").nth(0)).to_contain_text("1 of 2")  # CPUs
    expect(row.get_by_role("cell").nth(1)).to_contain_text("1 of 1")  # running jobs
    expect(row.get_by_role("cell").nth(2)).to_have_text("1")  # waiting
    expect(row.get_by_label(f"{user.username} running jobs: 1 of 1 allowed")).to_be_visible()
    sharing = page.locator("#vc-default .vc-users p").first
    expect(sharing).to_contain_text("Each user may have at most 2 CPUs, 1 running jobs at once.")
    expect(sharing).to_contain_text("Members of power: 4 CPUs.")
    expect(sharing).to_contain_text("go by their users' recent use (fair share")
    expect(page.locator("#vc-research .vc-users")).to_contain_text("Users have no limit here.")
    screenshots(page, "virtual-clusters-users")
