"""Groups and their ACLs through a real server."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from server.harness import Account, RunningServer


def unique_group() -> str:
    return f"grp_{uuid.uuid4().hex[:8]}"


def as_admin(server: RunningServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with server.client(server.admin_token()) as client:
        return client.request(method, path, **kwargs)


def group(server: RunningServer, name: str) -> dict[str, Any]:
    response = as_admin(server, "GET", f"/groups/{name}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_builtin_groups_exist(pai_server: RunningServer, alice: Account) -> None:
    with pai_server.client(alice.token) as client:
        listed = {entry["groupname"]: entry for entry in client.get("/groups").json()}
    assert listed["default"]["extension"]["acls"] == {
        "admin": False,
        "virtualClusters": ["default"],
        "storageConfigs": [],
    }
    assert listed["admingroup"]["extension"]["acls"]["admin"] is True


def test_a_group_keeps_its_acls_and_other_extension_attributes(pai_server: RunningServer) -> None:
    name = unique_group()
    response = as_admin(
        pai_server,
        "POST",
        "/groups",
        json={
            "groupname": name,
            "description": "vision team",
            "externalName": "CN=vision",
            "extension": {
                "acls": {"virtualClusters": ["vc_b", "vc_a"], "storageConfigs": ["nfs"]},
                "color": "blue",
            },
        },
    )
    assert response.status_code == 201, response.text
    assert group(pai_server, name) == {
        "groupname": name,
        "description": "vision team",
        "externalName": "CN=vision",
        "extension": {
            "acls": {
                "admin": False,
                "virtualClusters": ["vc_a", "vc_b"],
                "storageConfigs": ["nfs"],
            },
            "color": "blue",
        },
    }


def test_group_names_and_duplicates_are_checked(pai_server: RunningServer) -> None:
    bad = as_admin(pai_server, "POST", "/groups", json={"groupname": "has-dash"})
    assert bad.status_code == 400
    assert bad.json()["message"].startswith("body.groupname:")
    duplicate = as_admin(pai_server, "POST", "/groups", json={"groupname": "default"})
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "ConflictGroupError")


def test_patch_changes_given_acl_entries_and_full_update_replaces(
    pai_server: RunningServer,
) -> None:
    name = unique_group()
    as_admin(
        pai_server,
        "POST",
        "/groups",
        json={"groupname": name, "extension": {"acls": {"virtualClusters": ["vc1"]}, "x": 1}},
    )
    patched = as_admin(
        pai_server,
        "PUT",
        "/groups",
        json={
            "patch": True,
            "data": {"groupname": name, "extension": {"acls": {"storageConfigs": ["s1"]}, "y": 2}},
        },
    )
    assert patched.status_code == 201, patched.text
    assert group(pai_server, name)["extension"] == {
        "acls": {"admin": False, "virtualClusters": ["vc1"], "storageConfigs": ["s1"]},
        "x": 1,
        "y": 2,
    }
    incomplete = as_admin(
        pai_server, "PUT", "/groups", json={"data": {"groupname": name, "description": "d"}}
    )
    assert incomplete.status_code == 400
    assert incomplete.json()["message"] == (
        "body.data.externalName: Field required with patch: false; "
        "body.data.extension: Field required with patch: false"
    )
    replaced = as_admin(
        pai_server,
        "PUT",
        "/groups",
        json={
            "patch": False,
            "data": {
                "groupname": name,
                "description": "new",
                "externalName": "",
                "extension": {"acls": {"virtualClusters": ["vc2"]}},
            },
        },
    )
    assert replaced.status_code == 201, replaced.text
    assert group(pai_server, name) == {
        "groupname": name,
        "description": "new",
        "externalName": "",
        "extension": {"acls": {"admin": False, "virtualClusters": ["vc2"], "storageConfigs": []}},
    }


def test_a_users_rights_follow_the_acls_of_their_groups(pai_server: RunningServer) -> None:
    name = unique_group()
    as_admin(pai_server, "POST", "/groups", json={"groupname": name})
    account = Account.create(pai_server)
    as_admin(pai_server, "PUT", f"/users/{account.username}/group", json={"groupname": name})
    as_admin(
        pai_server,
        "PUT",
        "/groups",
        json={"patch": True, "data": {"groupname": name, "extension": {"acls": {"admin": True}}}},
    )
    with pai_server.client(account.token) as client:
        me = client.get(f"/users/{account.username}").json()
        assert me["admin"] is True
        assert client.get(f"/groups/{name}/userlist").status_code == 200
    assert as_admin(pai_server, "DELETE", f"/groups/{name}").status_code == 201
    with pai_server.client(account.token) as client:
        me = client.get(f"/users/{account.username}").json()
        assert (me["admin"], me["grouplist"]) == (False, ["default"])
        assert client.get(f"/groups/{name}").status_code == 404


def test_userlist_names_the_members(pai_server: RunningServer, alice: Account) -> None:
    name = unique_group()
    as_admin(pai_server, "POST", "/groups", json={"groupname": name})
    as_admin(pai_server, "PUT", f"/users/{alice.username}/group", json={"groupname": name})
    response = as_admin(pai_server, "GET", f"/groups/{name}/userlist")
    assert [member["username"] for member in response.json()] == [alice.username]
    missing = as_admin(pai_server, "GET", "/groups/no_such_group/userlist")
    assert (missing.status_code, missing.json()["code"]) == (404, "NoGroupError")


def test_builtin_groups_cannot_be_deleted(pai_server: RunningServer) -> None:
    for name in ("default", "admingroup"):
        response = as_admin(pai_server, "DELETE", f"/groups/{name}")
        assert response.status_code == 403
        assert response.json()["message"] == f"the '{name}' group cannot be deleted"
    missing = as_admin(pai_server, "DELETE", "/groups/no_such_group")
    assert (missing.status_code, missing.json()["code"]) == (404, "NoGroupError")
