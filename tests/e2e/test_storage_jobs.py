"""Jobs and team storage through the whole platform and the `pai` command: a group's storage
is mounted where the job asks, the job's output is copied out with `pai storage cp` after it
ends, and a job naming a storage its owner may not use is refused when it is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.pai_runner import Pai, make_pai
from server.harness import Account, RunningServer
from server.jobapi import job_yaml, submit, unique, wait_for
from server.storagehelpers import define_storage, grant_to_default_group, new_group, unique_storage

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bob(sqlite_platform: RunningServer) -> Account:
    return Account.create(sqlite_platform)


@pytest.fixture(scope="module")
def team(
    sqlite_platform: RunningServer, alice: Account, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("team")
    name = unique_storage()
    define_storage(sqlite_platform, name, "directory", {"path": str(root)})
    new_group(sqlite_platform, [name], [alice.username])
    return name, root


def pai_as(server: RunningServer, account: Account, directory: Path) -> Pai:
    pai = make_pai(directory)
    pai.login(server, account.username, account.password)
    return pai


def storages_block(*entries: str) -> str:
    return "  storages:\n" + "".join(f"    - {entry}\n" for entry in entries)


def test_a_job_mounts_its_groups_storage_and_its_output_is_copied_out_after_it_ends(
    sqlite_platform: RunningServer, team: tuple[str, Path], alice: Account, tmp_path: Path
) -> None:
    name, root = team
    variable = "PAI_STORAGE_" + name.upper().replace("-", "_")
    pai = pai_as(sqlite_platform, alice, tmp_path)
    seed = tmp_path / "seed.txt"
    seed.write_text("input for the job\n")
    copied_in = pai.run("storage", "cp", str(seed), f"{name}:inputs/seed.txt")
    assert copied_in.returncode == 0, copied_in.stderr

    job = job_yaml(
        unique("writes"),
        [
            f'test "${variable}" = /mnt/results && test "$PAI_STORAGES" = {name}',
            "cat /mnt/results/inputs/seed.txt",
            'echo "written by $PAI_USER_NAME in $PAI_JOB_NAME" > /mnt/results/out.txt',
        ],
        extras=storages_block(f"{{name: {name}, mountPath: /mnt/results}}"),
    )
    with sqlite_platform.client(alice.token) as client:
        framework = submit(client, job)
        finished = wait_for(client, framework)
    assert finished["jobStatus"]["state"] == "SUCCEEDED", finished

    copied_out = pai.run("storage", "cp", f"{name}:out.txt", str(tmp_path / "out.txt"))
    assert copied_out.returncode == 0, copied_out.stderr
    assert (tmp_path / "out.txt").read_text() == f"written by {alice.username} in {framework}\n"
    assert (root / "out.txt").exists()
    assert not Path("/mnt/results").exists(), "the mount must exist in the task's view only"

    listed = pai.run("storage", "ls", f"{name}:")
    assert "out.txt" in listed.stdout and "inputs/" in listed.stdout


def test_a_user_outside_the_group_is_refused_at_submission_and_nothing_is_recorded(
    sqlite_platform: RunningServer, team: tuple[str, Path], bob: Account
) -> None:
    name, _ = team
    job_name = unique("not-mine")
    job = job_yaml(job_name, ["true"], extras=storages_block(f"{{name: {name}}}"))
    unknown = job_yaml(
        unique("unknown"), ["true"], extras=storages_block("{name: no-such-storage}")
    )
    with sqlite_platform.client(bob.token) as client:
        refused = client.post("/jobs", content=job, headers={"Content-Type": "text/yaml"})
        missing = client.post("/jobs", content=unknown, headers={"Content-Type": "text/yaml"})
        recorded = client.get(f"/jobs/{bob.username}~{job_name}")
    line = job.splitlines().index(f"    - {{name: {name}}}") + 1
    assert refused.status_code == 403
    assert refused.json()["code"] == "ForbiddenUserError"
    assert refused.json()["message"].startswith(f"line {line}: extras.storages.0.name: ")
    assert f"may not use storage '{name}'" in refused.json()["message"]
    assert (missing.status_code, missing.json()["code"]) == (404, "NoStorageError")
    assert "storage 'no-such-storage' does not exist" in missing.json()["message"]
    assert recorded.status_code == 404


@pytest.mark.parametrize(
    ("mount_path", "problem"),
    [
        ("relative/path", "must be an absolute path"),
        ("/mnt/../etc", "must be written plainly"),
        ("/proc/x", "file system of the kernel"),
    ],
)
def test_a_bad_mount_path_is_refused_with_its_line(
    sqlite_platform: RunningServer,
    team: tuple[str, Path],
    alice: Account,
    mount_path: str,
    problem: str,
) -> None:
    name, _ = team
    job = job_yaml(
        unique("bad-mount"),
        ["true"],
        extras=storages_block(f"{{name: {name}, mountPath: {mount_path}}}"),
    )
    with sqlite_platform.client(alice.token) as client:
        response = client.post("/jobs", content=job, headers={"Content-Type": "text/yaml"})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "InvalidProtocolError"
    assert problem in body["message"]
    assert body["problems"][0]["path"].startswith("extras.storages.0")
    assert body["problems"][0]["line"] > 0


def test_an_empty_list_mounts_the_default_storages_and_two_jobs_mount_different_ones_at_one_path(
    sqlite_platform: RunningServer, alice: Account, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    default_name = unique_storage("defaults")
    define_storage(sqlite_platform, default_name, "directory", {"path": str(shared)})
    grant_to_default_group(sqlite_platform, [default_name])
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = unique_storage("other")
    define_storage(sqlite_platform, other, "directory", {"path": str(other_root)})
    new_group(sqlite_platform, [other], [alice.username])

    defaults_job = job_yaml(
        unique("defaults"),
        [f"echo default > /mnt/{default_name}/by-default.txt", "sleep 2"],
        extras="  storages: []",
    )
    first = job_yaml(
        unique("first"),
        ["echo first > /mnt/data/marker.txt", "sleep 2"],
        extras=storages_block(f"{{name: {default_name}, mountPath: /mnt/data}}"),
    )
    second = job_yaml(
        unique("second"),
        ["echo second > /mnt/data/marker.txt", "sleep 2"],
        extras=storages_block(f"{{name: {other}, mountPath: /mnt/data}}"),
    )
    with sqlite_platform.client(alice.token) as client:
        names = [submit(client, text) for text in (defaults_job, first, second)]
        states = [wait_for(client, name)["jobStatus"]["state"] for name in names]
    assert states == ["SUCCEEDED"] * 3
    assert (shared / "by-default.txt").read_text() == "default\n"
    assert (shared / "marker.txt").read_text() == "first\n"
    assert (other_root / "marker.txt").read_text() == "second\n"


def test_a_read_only_storage_is_mounted_read_only(
    sqlite_platform: RunningServer, alice: Account, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_text("a,b\n")
    name = unique_storage("ro")
    define_storage(sqlite_platform, name, "directory", {"path": str(tmp_path)}, readOnly=True)
    new_group(sqlite_platform, [name], [alice.username])
    job = job_yaml(
        unique("reads"),
        [f"cat /mnt/{name}/data.csv", f"! touch /mnt/{name}/written 2>/dev/null"],
        extras=storages_block(f"{{name: {name}}}"),
    )
    with sqlite_platform.client(alice.token) as client:
        state = wait_for(client, submit(client, job))["jobStatus"]["state"]
    assert state == "SUCCEEDED"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data.csv"]
