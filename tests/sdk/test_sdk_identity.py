"""Users, groups and tokens through the SDK against a real server."""

from __future__ import annotations

import hashlib

import pytest

from pai.sdk import Client, InvalidRequestError, NotFoundError, UnauthorizedError, User
from sdk.jobs_api import unique
from server.harness import Account, RunningServer


def test_info_needs_no_login(pai_server: RunningServer) -> None:
    with Client(pai_server.base_url) as client:
        info = client.info()

    assert (info.name, info.authn_method) == ("PAI RESTful API", "basic")


def test_an_admin_gives_a_new_user_a_vc_through_a_group(
    pai_server: RunningServer, admin_client: Client
) -> None:
    group, username = unique("team").replace("-", "_"), unique("carol")
    admin_client.create_group(group, virtual_clusters=["research"], description="a team")
    admin_client.create_user(username, "password1", email="carol@example.org")

    admin_client.add_user_to_group(username, group)

    with Client.login(pai_server.base_url, username, "password1") as carol:
        me = carol.user(username)
        assert carol.whoami().admin is False
    assert group in me.grouplist
    assert "research" in me.virtual_cluster
    assert admin_client.group(group).virtual_clusters == ["research"]
    assert username in [user.username for user in admin_client.group_members(group)]

    admin_client.remove_user_from_group(username, group)
    assert "research" not in admin_client.user(username).virtual_cluster


def test_group_rights_change_in_place(admin_client: Client) -> None:
    group = unique("ops").replace("-", "_")
    admin_client.create_group(group)

    admin_client.update_group(group, admin=True, virtual_clusters=["default"])

    updated = admin_client.group(group)
    assert (updated.admin, updated.virtual_clusters) == (True, ["default"])
    admin_client.delete_group(group)
    assert group not in [g.groupname for g in admin_client.groups()]


def test_a_new_password_replaces_the_old_one(
    pai_server: RunningServer, admin_client: Client
) -> None:
    username = unique("dave")
    admin_client.create_user(username, "password1")

    admin_client.set_password(username, "password2")

    with pytest.raises(InvalidRequestError):
        Client.login(pai_server.base_url, username, "password1")
    with Client.login(pai_server.base_url, username, "password2") as dave:
        dave.change_password("password2", "password3")
    Client.login(pai_server.base_url, username, "password3").close()


def test_application_tokens_live_until_revoked(
    pai_server: RunningServer, alice: Account, alice_client: Client
) -> None:
    token = alice_client.create_application_token()

    with Client(pai_server.base_url, token) as robot:
        check = robot.whoami()
        assert (check.username, check.application, check.exp) == (alice.username, True, None)
        hashes = {info.token_hash: info for info in alice_client.tokens()}
        assert hashes[hashlib.sha256(token.encode()).hexdigest()].application is True

        alice_client.revoke_token(token)

        with pytest.raises(UnauthorizedError):
            robot.whoami()


def test_logout_revokes_the_token(pai_server: RunningServer, alice: Account) -> None:
    client = Client.login(pai_server.base_url, alice.username, alice.password)

    client.logout()

    with client, pytest.raises(UnauthorizedError):
        client.whoami()


def test_deleted_users_are_gone(admin_client: Client) -> None:
    username = unique("erin")
    admin_client.create_user(username, "password1")

    admin_client.delete_user(username)

    with pytest.raises(NotFoundError):
        admin_client.user(username)


def test_objects_keep_fields_a_newer_server_adds() -> None:
    user = User.model_validate({"username": "u", "virtualCluster": ["a"], "quota": {"gpu": 2}})

    assert user.virtual_cluster == ["a"]
    assert user.raw() == {"username": "u", "virtualCluster": ["a"], "quota": {"gpu": 2}}
