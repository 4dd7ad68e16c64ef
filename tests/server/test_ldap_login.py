"""Logging in against a real LDAP directory (OpenLDAP's slapd on 127.0.0.1): the directory's
groups decide the VCs, people it does not know stay out, and user names cannot inject filters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai.authn_settings import AuthnSettings
from providers.slapd import GROUPS, Slapd, group_dn, password_of
from server.directory_groups import directory_group, user_view
from server.harness import RunningServer, server_settings

StartServer = Callable[..., RunningServer]


@pytest.fixture
def start_ldap_pai(
    ldap_directory: Slapd, start_pai_server: StartServer, pai_database_url: str, tmp_path: Path
) -> Callable[..., RunningServer]:
    """Start a PAI that logs in against the directory (`env` overrides PAI_LDAP_*)."""

    def start(login_rate_limit: int = 10_000, **env: str) -> RunningServer:
        settings = server_settings(
            tmp_path / "pai-home",
            pai_database_url,
            login_rate_limit=login_rate_limit,
            authn=AuthnSettings.from_env(ldap_directory.settings_env(**env)),
        )
        return start_pai_server(settings)

    return start


@pytest.fixture
def pai(start_ldap_pai: Callable[..., RunningServer]) -> RunningServer:
    """Groups found under ou=groups; PAI groups named by the directory groups' cn."""
    server = start_ldap_pai()
    directory_group(server, "vision_team", "vision", "vision")
    directory_group(server, "speech_team", "speech", "speech")
    return server


def login(server: RunningServer, username: str, password: str) -> httpx.Response:
    with server.client() as client:
        return client.post("/authn/basic/login", json={"username": username, "password": password})


def logged_in(server: RunningServer, username: str) -> dict[str, Any]:
    response = login(server, username, password_of(username))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_api_says_it_logs_in_against_ldap(pai: RunningServer) -> None:
    with pai.client() as client:
        assert client.get("/info").json()["authnMethod"] == "basic"
        assert client.get("/authn/info").json() == {
            "authn_type": "basic",
            "loginURI": "/api/v2/authn/basic/login",
            "loginURIMethod": "post",
            "mode": "ldap",
            "provider": "",
        }


def test_first_login_creates_the_user_with_the_directorys_groups_and_vcs(
    pai: RunningServer,
) -> None:
    answer = logged_in(pai, "alice")

    assert (answer["user"], answer["admin"]) == ("alice", False)
    alice = user_view(pai, "alice")
    assert alice["grouplist"] == ["default", "vision_team"]
    assert alice["virtualCluster"] == ["default", "vision"]
    assert alice["email"] == "alice@example.org"


def test_a_group_change_in_the_directory_moves_vc_access_at_the_next_login(
    pai: RunningServer, ldap_directory: Slapd
) -> None:
    first = logged_in(pai, "carol")
    assert user_view(pai, "carol")["virtualCluster"] == ["default", "vision"]

    ldap_directory.remove_from_group("carol", "vision")
    ldap_directory.add_to_group("carol", "speech")
    logged_in(pai, "carol")

    assert user_view(pai, "carol")["virtualCluster"] == ["default", "speech"]
    with pai.client(first["token"]) as client:
        assert client.get("/users/carol").json()["virtualCluster"] == ["default", "speech"]


def test_member_of_and_group_dns_work_as_well(
    start_ldap_pai: Callable[..., RunningServer],
) -> None:
    server = start_ldap_pai(PAI_LDAP_GROUP_BASE="", PAI_AUTHN_ADMIN_GROUPS=group_dn("speech"))
    directory_group(server, "vision_team", group_dn("vision").upper(), "vision")

    assert logged_in(server, "alice")["admin"] is False
    assert user_view(server, "alice")["virtualCluster"] == ["default", "vision"]
    assert logged_in(server, "bob")["admin"] is True


def test_a_user_absent_from_the_directory_cannot_log_in(
    pai: RunningServer, ldap_directory: Slapd
) -> None:
    logged_in(pai, "bob")
    ldap_directory.delete_person("bob")

    response = login(pai, "bob", password_of("bob"))
    stranger = login(pai, "nobody", "whatever-password")

    assert response.status_code == 400
    assert response.json() == {
        "code": "NoUserError",
        "message": "user 'bob' does not exist in the directory",
    }
    assert stranger.json()["code"] == "NoUserError"


def test_a_wrong_password_is_refused(pai: RunningServer) -> None:
    response = login(pai, "alice", "not-alices-password")
    assert response.status_code == 400
    assert response.json() == {
        "code": "IncorrectPasswordError",
        "message": "the password is incorrect",
    }


@pytest.mark.parametrize("name", ["al*", "*", "alice)(uid=*", "*)(|(uid=*", "al\\2a"])
def test_a_user_name_cannot_inject_ldap_filter_syntax(pai: RunningServer, name: str) -> None:
    """Unescaped, `(uid=al*)` would find alice and bind as her with her password."""
    response = login(pai, name, password_of("alice"))
    assert response.status_code == 400
    assert response.json()["code"] == "NoUserError"


def test_a_directory_name_that_is_no_pai_user_name_is_refused(pai: RunningServer) -> None:
    response = login(pai, "al*ce", password_of("al*ce"))  # the directory does have "al*ce"
    assert response.status_code == 401
    assert "not a valid PAI user name" in response.json()["message"]


def test_failed_logins_are_limited_per_account_and_address(
    start_ldap_pai: Callable[..., RunningServer],
) -> None:
    server = start_ldap_pai(login_rate_limit=3)
    for _ in range(3):
        assert login(server, "alice", "guess-guess").status_code == 400

    locked = login(server, "alice", password_of("alice"))

    assert locked.status_code == 429
    assert "too many failed logins for alice from 127.0.0.1" in locked.json()["message"]
    assert login(server, "bob", password_of("bob")).status_code == 200


def test_the_local_administrator_keeps_the_way_in_and_local_users_become_directory_users(
    pai: RunningServer,
) -> None:
    local_alice = pai.create_user("alice")
    admin = login(pai, pai.admin.username, pai.admin.password)

    with_local_password = login(pai, "alice", local_alice.password)
    with_directory_password = login(pai, "alice", password_of("alice"))

    assert admin.status_code == 200
    assert with_local_password.status_code == 400
    assert with_directory_password.status_code == 200
    with pai.client(with_directory_password.json()["token"]) as client:
        changed = client.put(
            "/users/me",
            json={"patch": True, "data": {"oldPassword": "x", "newPassword": "new-secret"}},
        )
    assert changed.status_code in (400, 403)


def test_the_bind_password_is_never_shown(
    start_ldap_pai: Callable[..., RunningServer], ldap_directory: Slapd
) -> None:
    server = start_ldap_pai()
    logged_in(server, "alice")
    unreachable = start_ldap_pai(PAI_LDAP_URL="ldap://127.0.0.1:9")
    down = login(unreachable, "alice", password_of("alice"))
    wrong_service = start_ldap_pai(PAI_LDAP_BIND_PASSWORD="not-the-service-password")
    misconfigured = login(wrong_service, "alice", password_of("alice"))

    assert down.status_code == 503
    assert "the LDAP directory at ldap://127.0.0.1:9 cannot be asked" in down.json()["message"]
    assert misconfigured.status_code == 503
    secret = ldap_directory.service_password
    for answer in (down, misconfigured):
        assert secret not in answer.text
    for running in (server, unreachable, wrong_service):
        assert secret not in repr(running.settings)
        assert secret not in running.log_path.read_text()
    database = server.settings.home / "pai.db"
    if database.exists():
        assert secret.encode() not in database.read_bytes()
    assert GROUPS  # the groups live where the settings say
