"""PAI groups that follow the organisation's directory groups, made as an administrator does."""

from __future__ import annotations

from server.harness import RunningServer


def directory_group(server: RunningServer, name: str, external_name: str, *vcs: str) -> None:
    """A PAI group `name` for the directory group `external_name`, granting `vcs`."""
    body = {
        "groupname": name,
        "externalName": external_name,
        "extension": {"acls": {"virtualClusters": list(vcs)}},
    }
    with server.client(server.admin_token()) as client:
        response = client.post("/groups", json=body)
    assert response.status_code == 201, response.text


def user_view(server: RunningServer, username: str) -> dict[str, object]:
    """The user as administrators see it (GET /users/NAME)."""
    with server.client(server.admin_token()) as client:
        response = client.get(f"/users/{username}")
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body
