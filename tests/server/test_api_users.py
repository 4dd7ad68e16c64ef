"""User accounts through a real server: CRUD, group-derived rights, self-service."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from server.harness import Account, RunningServer, StartServer


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def user(server: RunningServer, username: str) -> dict[str, Any]:
    with server.client(server.admin_token()) as client:
        response = client.get(f"/users/{username}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def as_admin(server: RunningServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with server.client(server.admin_token()) as client:
        return client.request(method, path, **kwargs)


def create_group(server: RunningServer, virtual_clusters: list[str], **acls: Any) -> str:
    name = unique("team")
    response = as_admin(
        server,
        "POST",
        "/groups",
        json={
            "groupname": name,
            "extension": {"acls": {"virtualClusters": virtual_clusters, **acls}},
        },
    )
    assert response.status_code == 201, response.text
    return name


def test_a_created_user_is_in_the_default_group(pai_server: RunningServer) -> None:
    name = unique("carol")
    response = as_admin(
        pai_server,
        "POST",
        "/users",
        json={
            "username": name,
            "password": "s3cret-pw",
            "email": "carol@example.com",
            "extension": {"sshKeys": ["ssh-ed25519 AAAA"]},
        },
    )
    assert response.status_code == 201
    assert user(pai_server, name) == {
        "username": name,
        "email": "carol@example.com",
        "grouplist": ["default"],
        "extension": {"sshKeys": ["ssh-ed25519 AAAA"]},
        "admin": False,
        "virtualCluster": ["default"],
        "storageConfig": [],
    }
    assert pai_server.login(name, "s3cret-pw")


def test_admin_flag_and_virtual_clusters_become_group_memberships(
    pai_server: RunningServer,
) -> None:
    group = create_group(pai_server, ["vc_research"], storageConfigs=["nfs_research"])
    name = unique("dave")
    response = as_admin(
        pai_server,
        "POST",
        "/users",
        json={
            "username": name,
            "password": "s3cret-pw",
            "admin": True,
            "virtualCluster": ["vc_research"],
        },
    )
    assert response.status_code == 201, response.text
    info = user(pai_server, name)
    assert info["grouplist"] == sorted(["admingroup", "default", group])
    assert info["admin"] is True
    assert info["virtualCluster"] == ["default", "vc_research"]
    assert info["storageConfig"] == ["nfs_research"]


def test_an_unknown_virtual_cluster_is_rejected_and_nothing_is_created(
    pai_server: RunningServer,
) -> None:
    name = unique("erin")
    response = as_admin(
        pai_server,
        "POST",
        "/users",
        json={"username": name, "password": "s3cret-pw", "virtualCluster": ["vc_nowhere"]},
    )
    assert response.status_code == 404
    assert response.json() == {
        "code": "NoVirtualClusterError",
        "message": "virtual cluster 'vc_nowhere' is not granted by any group",
    }
    assert as_admin(pai_server, "GET", f"/users/{name}").status_code == 404


def test_creating_an_existing_user_conflicts(pai_server: RunningServer, alice: Account) -> None:
    response = as_admin(
        pai_server, "POST", "/users", json={"username": alice.username, "password": "another1"}
    )
    assert (response.status_code, response.json()["code"]) == (409, "ConflictUserError")
    assert pai_server.login(alice.username, alice.password)


def test_invalid_user_fields_are_named(pai_server: RunningServer) -> None:
    response = as_admin(
        pai_server,
        "POST",
        "/users",
        json={"username": "no spaces", "password": "short", "email": "not-an-email"},
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "InvalidParametersError"
    for field in ("body.username", "body.password", "body.email"):
        assert field in body["message"]
    assert "short" not in body["message"]  # input values are not echoed


def test_a_user_name_is_ascii_as_in_openpai(pai_server: RunningServer) -> None:
    """OpenPAI's `^[\\w.-]+$` is JavaScript's, where `\\w` is ASCII: so is ours."""
    response = as_admin(pai_server, "POST", "/users", json={"username": "è", "password": "secret1"})
    assert response.status_code == 400 and "body.username" in response.json()["message"]


def test_an_email_is_refused_with_a_control_character_in_it(pai_server: RunningServer) -> None:
    """U+0085 is a space to Python and Rust but not to ECMAScript: the documented pattern names
    the characters it refuses, so every reader of the API document agrees with the server."""
    refused = as_admin(
        pai_server,
        "POST",
        "/users",
        json={"username": "nel_user", "password": "secret1", "email": "a\x85b@example.com"},
    )
    assert refused.status_code == 400 and "body.email" in refused.json()["message"]
    accepted = Account.create(pai_server, email="jürgen@exämple.de")
    with pai_server.client(accepted.token) as client:
        assert client.get(f"/users/{accepted.username}").json()["email"] == "jürgen@exämple.de"


def test_users_are_listed_for_any_user(pai_server: RunningServer, alice: Account) -> None:
    with pai_server.client(alice.token) as client:
        response = client.get("/users")
    assert response.status_code == 200
    assert {"admin", alice.username} <= {entry["username"] for entry in response.json()}


def test_admin_patches_only_the_given_fields(pai_server: RunningServer) -> None:
    account = Account.create(pai_server, email="frank@example.com", extension={"a": 1})
    response = as_admin(
        pai_server,
        "PUT",
        "/users",
        json={"patch": True, "data": {"username": account.username, "extension": {"b": 2}}},
    )
    assert response.status_code == 201
    info = user(pai_server, account.username)
    assert (info["email"], info["extension"]) == ("frank@example.com", {"a": 1, "b": 2})


def test_admin_full_update_replaces_and_requires_every_field(pai_server: RunningServer) -> None:
    group = create_group(pai_server, ["vc_full"])
    account = Account.create(pai_server, extension={"a": 1})
    incomplete = as_admin(
        pai_server,
        "PUT",
        "/users",
        json={"patch": False, "data": {"username": account.username, "email": "x@example.com"}},
    )
    assert incomplete.status_code == 400
    assert incomplete.json()["message"] == (
        "body.data.virtualCluster: Field required with patch: false; "
        "body.data.admin: Field required with patch: false; "
        "body.data.extension: Field required with patch: false"
    )
    complete = as_admin(
        pai_server,
        "PUT",
        "/users",
        json={
            "patch": False,
            "data": {
                "username": account.username,
                "email": "g@example.com",
                "virtualCluster": ["vc_full"],
                "admin": False,
                "extension": {"b": 2},
                "password": "changed-pw",
            },
        },
    )
    assert complete.status_code == 201, complete.text
    info = user(pai_server, account.username)
    assert (info["email"], info["extension"]) == ("g@example.com", {"b": 2})
    assert info["grouplist"] == sorted(["default", group])
    assert pai_server.login(account.username, "changed-pw")


def test_updating_a_missing_user_is_404(pai_server: RunningServer) -> None:
    response = as_admin(
        pai_server, "PUT", "/users", json={"patch": True, "data": {"username": "ghost_user"}}
    )
    assert (response.status_code, response.json()["code"]) == (404, "NoUserError")


def test_a_password_reset_signs_the_user_out_but_keeps_application_tokens(
    pai_server: RunningServer,
) -> None:
    account = Account.create(pai_server)
    with pai_server.client(account.token) as client:
        app_token = client.post("/tokens/application").json()["token"]
    as_admin(
        pai_server,
        "PUT",
        "/users",
        json={"patch": True, "data": {"username": account.username, "password": "reset-pw"}},
    )
    with pai_server.client(account.token) as client:
        assert client.get("/tokens/check").status_code == 401
    with pai_server.client(app_token) as client:
        assert client.get("/tokens/check").status_code == 200


def test_deleting_a_user_removes_the_account_and_its_tokens(pai_server: RunningServer) -> None:
    account = Account.create(pai_server)
    assert as_admin(pai_server, "DELETE", f"/users/{account.username}").status_code == 200
    assert as_admin(pai_server, "GET", f"/users/{account.username}").status_code == 404
    with pai_server.client(account.token) as client:
        assert client.get("/tokens/check").status_code == 401
    again = as_admin(pai_server, "DELETE", f"/users/{account.username}")
    assert (again.status_code, again.json()["code"]) == (404, "NoUserError")


def test_the_last_administrator_cannot_be_removed(start_pai_server: StartServer) -> None:
    server = start_pai_server()
    for method, path, body in (
        ("DELETE", "/users/admin", None),
        ("PUT", "/users", {"patch": True, "data": {"username": "admin", "admin": False}}),
        ("DELETE", "/users/admin/group", {"groupname": "admingroup"}),
        ("PUT", "/users/admin/grouplist", {"grouplist": []}),
    ):
        response = as_admin(server, method, path, json=body)
        assert response.status_code == 403, (method, path)
        assert "without an administrator" in response.json()["message"]
    assert user(server, "admin")["admin"] is True


def test_group_membership_is_managed_one_by_one_or_as_a_list(pai_server: RunningServer) -> None:
    account = Account.create(pai_server)
    first, second = create_group(pai_server, ["vc_one"]), create_group(pai_server, ["vc_two"])
    path = f"/users/{account.username}"
    assert (
        as_admin(pai_server, "PUT", f"{path}/group", json={"groupname": first}).status_code == 201
    )
    assert user(pai_server, account.username)["virtualCluster"] == ["default", "vc_one"]
    response = as_admin(pai_server, "DELETE", f"{path}/group", json={"groupname": first})
    assert response.status_code == 201
    assert user(pai_server, account.username)["grouplist"] == ["default"]
    response = as_admin(pai_server, "PUT", f"{path}/grouplist", json={"grouplist": [second]})
    assert response.status_code == 201
    assert user(pai_server, account.username)["grouplist"] == sorted(["default", second])


def test_membership_errors_are_explicit(pai_server: RunningServer, alice: Account) -> None:
    path = f"/users/{alice.username}"
    missing = as_admin(pai_server, "PUT", f"{path}/group", json={"groupname": "no_such_group"})
    assert (missing.status_code, missing.json()["code"]) == (404, "NoGroupError")
    default = as_admin(pai_server, "DELETE", f"{path}/group", json={"groupname": "default"})
    assert default.status_code == 403
    assert default.json()["message"] == "every user belongs to the default group"
    listed = as_admin(pai_server, "PUT", f"{path}/grouplist", json={"grouplist": ["nope_x"]})
    assert (listed.status_code, listed.json()["code"]) == (404, "NoGroupError")
    assert user(pai_server, alice.username)["grouplist"] == ["default"]


def test_users_change_their_email_and_password_with_the_old_password(
    pai_server: RunningServer,
) -> None:
    account = Account.create(pai_server)
    other_session = pai_server.login(account.username, account.password)
    with pai_server.client(account.token) as client:
        no_old = client.put("/users/me", json={"data": {"newPassword": "brand-new-pw"}})
        wrong_old = client.put(
            "/users/me", json={"data": {"email": "h@example.com", "oldPassword": "wrong!"}}
        )
        changed = client.put(
            "/users/me",
            json={
                "data": {
                    "email": "h@example.com",
                    "newPassword": "brand-new-pw",
                    "oldPassword": account.password,
                }
            },
        )
        still_signed_in = client.get("/tokens/check").status_code
    assert (no_old.status_code, no_old.json()["code"]) == (400, "InvalidParametersError")
    assert "data.oldPassword" in no_old.json()["message"]
    assert (wrong_old.status_code, wrong_old.json()["code"]) == (400, "IncorrectPasswordError")
    assert changed.status_code == 201, changed.text
    assert still_signed_in == 200
    assert user(pai_server, account.username)["email"] == "h@example.com"
    with pai_server.client(other_session) as client:
        assert client.get("/tokens/check").status_code == 401
    assert pai_server.login(account.username, "brand-new-pw")
    with pai_server.client() as client:
        old = client.post(
            "/authn/basic/login",
            json={"username": account.username, "password": account.password},
        )
    assert old.status_code == 400


def test_users_update_their_extension_without_a_password(pai_server: RunningServer) -> None:
    account = Account.create(pai_server, extension={"keep": True})
    with pai_server.client(account.token) as client:
        merged = client.put("/users/me", json={"patch": True, "data": {"extension": {"k": 1}}})
        assert merged.status_code == 201
        assert user(pai_server, account.username)["extension"] == {"keep": True, "k": 1}
        replaced = client.put("/users/me", json={"data": {"extension": {"only": 2}}})
        assert replaced.status_code == 201
        assert user(pai_server, account.username)["extension"] == {"only": 2}


def test_users_cannot_update_somebody_else_through_me(
    pai_server: RunningServer, alice: Account, bob: Account
) -> None:
    with pai_server.client(alice.token) as client:
        response = client.put(
            "/users/me", json={"data": {"username": bob.username, "extension": {"x": 1}}}
        )
    assert (response.status_code, response.json()["code"]) == (403, "ForbiddenUserError")
