"""`pai group limit` and `pai vc VC`: an administrator limits a group's members in a VC, and
anyone sees each user's use against the limit (on the module's platform, four CPU nodes)."""

from __future__ import annotations

import json
from pathlib import Path

from pai_runner import Pai, make_pai, single_error

from sdk.jobs_api import command_job, unique
from server.harness import RunningServer
from server.test_clusters_api import eventually


def logged_in(server: RunningServer, directory: Path, username: str, password: str) -> Pai:
    pai = make_pai(directory)
    pai.login(server, username, password)
    return pai


def test_an_administrator_limits_a_groups_members_and_removes_the_limit(
    jobs_server: RunningServer, tmp_path: Path
) -> None:
    admin = logged_in(jobs_server, tmp_path, jobs_server.admin.username, jobs_server.admin.password)
    group = unique("interns").replace("-", "_")
    assert admin.run("group", "create", group, "--vc", "default").returncode == 0

    set_limit = admin.run("group", "limit", group, "default", "--gpus", "2", "--jobs", "1")

    assert set_limit.returncode == 0, set_limit.stderr
    assert set_limit.stdout == f"members of {group} may have at most 2 GPUs, 1 jobs in VC default\n"
    shown = admin.run("vc", "default").stdout
    assert f"Members of {group}: 2 GPUs, 1 jobs (set by admin)." in shown
    assert "Limit per user: none (the VC's default)." in shown
    limits = json.loads(admin.run("vc", "default", "--json").stdout)["userLimits"]
    (mine,) = [entry for entry in limits["groups"] if entry["group"] == group]
    assert (mine["gpus"], mine["cpus"], mine["jobs"]) == (2, None, 1)

    unlimited = admin.run("group", "limit", group, "default", "--unlimited")
    assert unlimited.stdout == f"members of {group} have no limit in VC default\n"
    removed = admin.run("group", "limit", group, "default", "--remove")
    assert removed.returncode == 0, removed.stderr
    again = single_error(admin.run("group", "limit", group, "default", "--remove"))
    assert again == (
        f"error: group '{group}' has no limit in virtual cluster 'default' (NoUserLimitError)"
    )


def test_a_limit_needs_one_clear_instruction_and_sane_numbers(
    jobs_server: RunningServer, tmp_path: Path
) -> None:
    admin = logged_in(jobs_server, tmp_path, jobs_server.admin.username, jobs_server.admin.password)
    nothing = admin.run("group", "limit", "default", "default")
    both = admin.run("group", "limit", "default", "default", "--gpus", "1", "--remove")
    negative = admin.run("group", "limit", "default", "default", "--gpus", "-1")

    for result in (nothing, both):
        assert result.returncode == 2
        words = " ".join(result.stderr.replace("│", " ").split())  # as the usage panel wraps it
        assert "give --gpus, --cpus and/or --jobs, or --unlimited, or --remove" in words
    assert negative.returncode == 2 and "--gpus" in negative.stderr
    assert json.loads(admin.run("vc", "default", "--json").stdout)["userLimits"]["groups"] == []


def test_vc_shows_each_users_use(jobs_server: RunningServer, tmp_path: Path) -> None:
    username = unique("carol").replace("-", "_")
    admin = logged_in(
        jobs_server, tmp_path / "admin", jobs_server.admin.username, jobs_server.admin.password
    )
    assert admin.run("user", "create", username, "--password", "password1").returncode == 0
    carol = logged_in(jobs_server, tmp_path / "carol", username, "password1")
    job = tmp_path / "job.yaml"
    job.write_text(command_job(unique("sleepy"), "sleep 60"))
    submitted = carol.run("submit", str(job))
    assert submitted.returncode == 0, submitted.stderr

    def shown() -> None:
        users = json.loads(carol.run("vc", "default", "--json").stdout)["users"]["users"]
        (mine,) = [user for user in users if user["username"] == username]
        assert (mine["cpus"], mine["jobs"], mine["limit"]["cpus"]) == (1, 1, None)

    eventually(shown, timeout=30)
    table = carol.run("vc", "default").stdout
    (row,) = [line for line in table.splitlines() if line.startswith(username)]
    assert row.split()[1:4] == ["0", "1", "1"]  # GPUs, CPUs, running jobs: no limit, no bars
    assert "the VC" in row
