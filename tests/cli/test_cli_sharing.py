"""`pai storage` and `pai market` as users run them, against the whole platform (on SQLite
only: every `pai` command is a process of its own, and the API behind them is tested on both
backends in tests/server)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pai_runner import Pai, make_pai, single_error

from server.harness import RunningServer, serve_platform, server_settings
from server.jobapi import job_yaml, unique
from server.storagehelpers import new_group

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jobs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with serve_platform(server_settings(tmp_path_factory.mktemp("pai-home"))) as server:
        yield server


@pytest.fixture
def user_pai(jobs_server: RunningServer, tmp_path: Path) -> tuple[Pai, str]:
    """`pai` logged in as a new plain user; returns it with the user's name."""
    credentials = jobs_server.create_user()
    pai = make_pai(tmp_path / "user")
    pai.login(jobs_server, credentials.username, credentials.password)
    return pai, credentials.username


def ok(result: object) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


def test_an_administrator_defines_and_grants_a_storage_that_a_user_then_fills(
    jobs_server: RunningServer, tmp_path: Path, user_pai: tuple[Pai, str]
) -> None:
    admin = make_pai(tmp_path / "admin")
    admin.login(jobs_server, jobs_server.admin.username, jobs_server.admin.password)
    root = tmp_path / "team"
    root.mkdir()
    name = f"cli-{uuid.uuid4().hex[:6]}"
    pai, username = user_pai
    group = new_group(jobs_server, [], [username])
    ok(admin.run("storage", "create", name, "--path", str(root), "--description", "team"))
    refused = pai.run("storage", "ls", name)
    assert "may not use storage" in single_error(refused)
    ok(admin.run("storage", "grant", name, group))

    listed = json.loads(ok(pai.run("storage", "list", "--json")))
    assert [storage["name"] for storage in listed] == [name]
    local = tmp_path / "a.txt"
    local.write_text("a")
    ok(pai.run("storage", "cp", str(local), f"{name}:data/raw/"))
    assert (root / "data" / "raw" / "a.txt").read_text() == "a"
    folder = tmp_path / "copied"
    ok(pai.run("storage", "cp", "-r", f"{name}:data", str(folder)))
    assert (folder / "raw" / "a.txt").read_text() == "a"
    ok(pai.run("storage", "rm", "-r", f"{name}:data"))
    assert list(root.iterdir()) == []

    audit = json.loads(ok(admin.run("audit", "--kind", "file", "--target", f"{name}:/", "--json")))
    assert [(event["actor"], event["action"]) for event in audit] == [
        (username, "delete"),
        (username, "upload"),
    ]


def test_a_user_publishes_a_finished_job_that_another_finds_stars_and_runs(
    jobs_server: RunningServer, tmp_path: Path, user_pai: tuple[Pai, str]
) -> None:
    pai, username = user_pai
    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        job_yaml(
            unique("greets"),
            ["echo <% $parameters.greeting %>"],
            top="parameters:\n  greeting: hello",
        )
    )
    job = ok(pai.run("submit", str(job_file))).split()[-1].rstrip(".")
    ok(pai.run("wait", job))
    name = f"greeter {uuid.uuid4().hex[:6]}"
    ok(pai.run("market", "publish", name, "--job", job, "--summary", "greets", "--tag", "demo"))

    other = make_pai(tmp_path / "other")
    credentials = jobs_server.create_user()
    other.login(jobs_server, credentials.username, credentials.password)
    found = json.loads(ok(other.run("market", "list", "--keyword", name.split()[1], "--json")))
    assert [(item["name"], item["author"]) for item in found] == [(name, username)]
    assert "parameters:" in ok(other.run("market", "show", name, "--yaml"))
    ok(other.run("market", "star", name))
    run = ok(other.run("market", "run", name, "--param", "greeting=bonjour")).strip()
    ok(other.run("wait", run))
    assert "bonjour" in ok(other.run("logs", run))
    shown = json.loads(ok(other.run("market", "show", name, "--json")))
    assert (shown["starNumber"], shown["useNumber"], shown["starred"]) == (1, 1, True)
