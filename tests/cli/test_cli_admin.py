"""`pai user`, `pai group` and `pai token`, run as an administrator and as a user runs them."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from pai_runner import Pai, make_pai, single_error

from server.harness import RunningServer


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def listing(pai: Pai, *command: str) -> list[dict[str, object]]:
    result = pai.run(*command, "--json")
    assert result.returncode == 0, result.stderr
    items: list[dict[str, object]] = json.loads(result.stdout)
    return items


def test_an_admin_gives_a_new_user_a_vc_through_a_group(
    admin_pai: Pai, pai: Pai, pai_server: RunningServer
) -> None:
    group, username = unique("vision"), unique("alice")

    created = admin_pai.run(
        "group", "create", group, "--vc", "research", "--description", "Vision team"
    )
    user = admin_pai.run("user", "create", username, input="password1\n")
    joined = admin_pai.run("user", "add-group", username, group)

    assert [r.returncode for r in (created, user, joined)] == [0, 0, 0], user.stderr
    assert created.stdout == f"group '{group}' is created\n"
    (entry,) = [u for u in listing(admin_pai, "user", "list") if u["username"] == username]
    assert entry["grouplist"] == ["default", group]
    assert entry["virtualCluster"] == ["default", "research"]
    (info,) = [g for g in listing(admin_pai, "group", "list") if g["groupname"] == group]
    assert info["extension"] == {
        "acls": {"admin": False, "virtualClusters": ["research"], "storageConfigs": []}
    }
    table = admin_pai.run("user", "list").stdout
    assert any(username in line and "research" in line for line in table.splitlines())

    pai.login(pai_server, username, "password1")
    assert pai.run("whoami").stdout.startswith(f"{username} (user)")


def test_group_rights_and_membership_change(admin_pai: Pai) -> None:
    group, username = unique("ops"), unique("bob")
    admin_pai.run("group", "create", group)
    admin_pai.run("user", "create", username, "--password", "password1")
    admin_pai.run("user", "add-group", username, group)

    assert admin_pai.run("group", "set-vcs", group, "default", "research").returncode == 0
    assert admin_pai.run("group", "set-admin", group, "true").returncode == 0
    (entry,) = [u for u in listing(admin_pai, "user", "list") if u["username"] == username]
    assert entry["admin"] is True
    assert entry["virtualCluster"] == ["default", "research"]

    assert admin_pai.run("user", "remove-group", username, group).returncode == 0
    assert admin_pai.run("group", "delete", group).returncode == 0
    assert admin_pai.run("user", "delete", username).returncode == 0
    assert username not in [u["username"] for u in listing(admin_pai, "user", "list")]
    assert group not in [g["groupname"] for g in listing(admin_pai, "group", "list")]


def test_an_admin_sets_a_password(admin_pai: Pai, pai: Pai, pai_server: RunningServer) -> None:
    username = unique("carol")
    admin_pai.run("user", "create", username, "--password", "password1")

    result = admin_pai.run("user", "set-password", username, input="password2\n")

    assert result.returncode == 0, result.stderr
    pai.login(pai_server, username, "password2")


def test_an_admin_revokes_a_users_tokens_at_once(
    admin_pai: Pai, pai_server: RunningServer, tmp_path: Path
) -> None:
    username = unique("erin")
    admin_pai.run("user", "create", username, "--password", "password1")
    erin = make_pai(tmp_path / "erin")  # her own machine, her own saved token
    erin.login(pai_server, username, "password1")
    assert erin.run("whoami").returncode == 0

    result = admin_pai.run("user", "revoke-tokens", username)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"the tokens of user '{username}' are revoked\n"
    assert single_error(erin.run("whoami")) == (
        "error: the token has been revoked (UnauthorizedUserError); log in again with `pai login`"
    )
    erin.login(pai_server, username, "password1")  # she may sign in again
    assert erin.run("whoami").returncode == 0


def test_an_empty_user_name_is_refused_before_anything_is_sent(admin_pai: Pai) -> None:
    result = admin_pai.run("user", "revoke-tokens", "")

    assert single_error(result) == "error: '' is not a name: a name cannot be empty, '.' or '..'"


def test_a_user_cannot_administer(admin_pai: Pai, pai: Pai, pai_server: RunningServer) -> None:
    username = unique("dave")
    admin_pai.run("user", "create", username, "--password", "password1")
    pai.login(pai_server, username, "password1")

    result = pai.run("user", "create", unique("mallory"), "--password", "password1")

    assert single_error(result) == (
        f"error: user '{username}' is not an administrator (ForbiddenUserError)"
    )


def test_an_existing_user_is_a_conflict(admin_pai: Pai) -> None:
    result = admin_pai.run("user", "create", "admin", "--password", "password1")

    assert single_error(result) == "error: user 'admin' already exists (ConflictUserError)"


def test_application_tokens_are_created_listed_and_revoked(
    admin_pai: Pai, pai_server: RunningServer
) -> None:
    created = admin_pai.run("token", "create-app")
    token = created.stdout.strip()
    token_hash = hashlib.sha256(token.encode()).hexdigest()

    assert created.returncode == 0, created.stderr
    assert created.stdout == f"{token}\n"
    with pai_server.client(token) as client:
        assert client.get("/tokens/check").json()["application"] is True
    listed = {entry["tokenHash"]: entry for entry in listing(admin_pai, "token", "list")}
    assert listed[token_hash]["application"] is True
    assert token_hash in admin_pai.run("token", "list").stdout

    revoked = admin_pai.run("token", "revoke", token_hash)

    assert revoked.returncode == 0, revoked.stderr
    assert token_hash not in [entry["tokenHash"] for entry in listing(admin_pai, "token", "list")]
    with pai_server.client(token) as client:
        assert client.get("/tokens/check").status_code == 401
